package jail

import (
	"context"

	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/workspace/changes"
)

// treeSnapshot is the workspace as it was before the code ran.
type treeSnapshot = changes.Tree

// workspaceLimits bounds the change scan: a workspace with more files than
// this reports no changes rather than stalling the supervisor.
func workspaceLimits() changes.Limits { return changes.Limits{MaxFiles: 100000} }

func scanTree(dir string) (treeSnapshot, error) {
	return changes.Scan(context.Background(), dir, workspaceLimits())
}

func diffTree(dir string, before treeSnapshot) (record.FileChanges, error) {
	ctx := context.Background()
	after, err := changes.Scan(ctx, dir, workspaceLimits())
	if err != nil {
		return record.FileChanges{}, err
	}
	return changes.Diff(ctx, dir, before, after)
}
