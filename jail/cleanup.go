package jail

// cleanup is a stack of undo steps for setup that can fail halfway, after
// gVisor's pkg/cleanup: each step that needs undoing registers its undo
// right after it succeeds, and a failure runs them newest first.
//
//	var undo cleanup
//	defer undo.cleanIf(&err)
//	f, err := open(...)
//	if err != nil { return err }
//	undo.add(func() { f.Close() })
type cleanup struct {
	fns []func()
}

// add registers f to run on failure.
func (c *cleanup) add(f func()) { c.fns = append(c.fns, f) }

// clean runs every registered step, newest first, and forgets them.
func (c *cleanup) clean() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// cleanIf runs clean when *err is set: the deferred form for a function
// with a named error result.
func (c *cleanup) cleanIf(err *error) {
	if *err != nil {
		c.clean()
	}
}
