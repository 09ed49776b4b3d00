//go:build !linux

package validatepool

import (
	"os"
	"syscall"
	"time"
)

// Workers need Linux: every function here fails or reports nothing.

func hardenWorker() error                         { return ErrUnsupported }
func dropPrivileges() error                       { return ErrUnsupported }
func sysProcAttr() *syscall.SysProcAttr           { return nil }
func limitWorker(int, int64, time.Duration) error { return ErrUnsupported }
func selfCPU() time.Duration                      { return 0 }
func exitCPU(*os.ProcessState) time.Duration      { return 0 }
func killedBySIGKILL(*os.ProcessState) bool       { return false }
func workersSupported() error                     { return ErrUnsupported }

type cpuTimer struct{}

func newCPUTimer() (*cpuTimer, error)     { return nil, ErrUnsupported }
func (*cpuTimer) arm(time.Duration) error { return ErrUnsupported }
