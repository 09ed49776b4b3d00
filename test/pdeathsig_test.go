//go:build linux

package integration

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pyjail/pyjail/record"
)

// TestThreadExitDoesNotKillJails is the regression test for jails killed
// at random by SIGKILL (found by the end-to-end tests). A jail's pid 1
// dies with the OS thread that forked it (PR_SET_PDEATHSIG), and Go
// retires threads whose goroutine exits while locked to them, as
// libcontainer's own mount-source goroutine does. Here many goroutines
// lock their thread and exit while jails run: no run may be killed.
func TestThreadExitDoesNotKillJails(t *testing.T) {
	e := sharedEnv(t)
	stop := make(chan struct{})
	var churn sync.WaitGroup
	for range 4 {
		churn.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				done := make(chan struct{})
				go func() {
					// Locked and returning: the runtime retires the thread.
					runtime.LockOSThread()
					close(done)
				}()
				<-done
				time.Sleep(time.Millisecond)
			}
		})
	}
	defer func() { close(stop); churn.Wait() }()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			res, err := e.jail.Run(t.Context(), record.Request{Profile: record.ProfileFull, Code: "import time\ntime.sleep(1.5)\nprint('alive')", Timeout: 30 * time.Second})
			if err != nil {
				t.Error(err)
				return
			}
			if res.Verdict != record.VerdictOK || strings.TrimSpace(res.Stdout) != "alive" {
				t.Errorf("run %d was killed while threads exited:\n%s", i, describe(res))
			}
		})
	}
	wg.Wait()
}
