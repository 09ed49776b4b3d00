# snippet: json and csv modules on strings
# expect-stdout: [{"a": "1", "b": "2"}]
import csv
import io
import json
rows = list(csv.DictReader(io.StringIO("a,b\n1,2\n")))
print(json.dumps(rows, sort_keys=True))
