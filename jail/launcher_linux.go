//go:build linux && cgo

package jail

import "runtime"

// launcherSpare is how many launcher threads exist beyond MaxConcurrent,
// for warm pools that boot jails while runs are in flight.
const launcherSpare = 4

// launcher starts containers from OS threads that never exit.
//
// A jail's pid 1 dies with its parent through PR_SET_PDEATHSIG, and the
// kernel takes "parent" to mean the *thread* that forked it. Go retires
// threads whose goroutine returns while locked to them, and libcontainer
// does exactly that (its mount-source goroutine locks a thread and
// returns). If such a thread had forked a jail earlier, that jail would be
// killed at random. Forking only from these permanently locked threads
// makes the parent thread live as long as the process.
type launcher struct {
	jobs chan func()
}

func newLauncher(threads int) launcher {
	l := launcher{jobs: make(chan func())}
	for range threads {
		go func() {
			// Locked and never unlocked, and the goroutine never returns:
			// the thread is this goroutine's alone for the process's life.
			runtime.LockOSThread()
			for job := range l.jobs {
				job()
			}
		}()
	}
	return l
}

// launch runs start on a launcher thread and returns its error.
func (l launcher) launch(start func() error) error {
	done := make(chan error, 1)
	l.jobs <- func() { done <- start() }
	return <-done
}
