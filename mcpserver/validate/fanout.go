package validate

import "github.com/santhosh-tekuri/jsonschema/v6"

// DefaultMaxFanOut is the default of Limits.MaxFanOut.
const DefaultMaxFanOut = 100_000

// fanOut returns the largest number of subschemas that one compiled schema
// applies to a single instance location, over every schema reachable from
// sch, saturating at limit+1.
//
// The count follows the in-place applicators: $ref, $recursiveRef,
// $dynamicRef (its static target), allOf, anyOf, oneOf, not, if, then,
// else, dependentSchemas and schema-valued dependencies. Forty $defs that
// each say {"allOf": [{"$ref": next}, {"$ref": next}]} count 2^40 here
// although they are 120 nodes: the validator would walk every path. Applicators
// that move to another location (properties, items, …) are followed to
// find every schema, but do not multiply, because the instance bounds
// them. A cycle of in-place references contributes nothing: the library
// stops it at validation with a "$ref cycle" error.
//
// This is an early, precise refusal for the common shapes of an
// exponential schema. It is not what bounds the work: data-driven
// blow-ups (a recursive anyOf over deep data) pass it, and the caller
// runs validation under a CPU and wall-clock budget for those.
func fanOut(sch *jsonschema.Schema, limit int) int {
	c := fanOutCounter{limit: limit, paths: map[*jsonschema.Schema]int{}, seen: map[*jsonschema.Schema]bool{}}
	worst := 0
	// An explicit stack: a schema can nest as deep as the depth limit, and
	// reachability must not recurse on the goroutine stack for every node.
	stack := []*jsonschema.Schema{sch}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || c.seen[s] {
			continue
		}
		c.seen[s] = true
		worst = max(worst, c.count(s, 0))
		if worst > limit {
			return worst
		}
		stack = append(stack, inPlace(s)...)
		stack = append(stack, elsewhere(s)...)
	}
	return worst
}

type fanOutCounter struct {
	limit int
	paths map[*jsonschema.Schema]int // memo; -1 while being counted
	seen  map[*jsonschema.Schema]bool
}

// maxFanOutDepth bounds the recursion of count. In-place chains deeper
// than this are themselves a reason to refuse: they count as over the limit.
const maxFanOutDepth = 10_000

// count returns how many schemas applying s visits at one location,
// itself included, saturating at limit+1.
func (c *fanOutCounter) count(s *jsonschema.Schema, depth int) int {
	if s == nil {
		return 0
	}
	switch n, ok := c.paths[s]; {
	case ok && n < 0:
		return 0 // an in-place cycle; see fanOut
	case ok:
		return n
	}
	if depth > maxFanOutDepth {
		return c.limit + 1
	}
	c.paths[s] = -1
	total := 1
	for _, child := range inPlace(s) {
		total += c.count(child, depth+1)
		if total > c.limit {
			total = c.limit + 1
			break
		}
	}
	c.paths[s] = total
	return total
}

// inPlace lists the subschemas s applies to the same instance location.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if d, ok := d.(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return out
}

// elsewhere lists the subschemas s applies to other instance locations:
// members, items and decoded content.
func elsewhere(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
}
