package validatepool

import (
	"fmt"
	"os"
	"strings"
)

// workerLimitChecks returns checks of a running worker's identity and
// limits, read from /proc.
func workerLimitChecks(memoryBytes int64) []func(pid int) error {
	field := func(pid int, file, prefix string) (string, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
		if err != nil {
			return "", err
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, prefix) {
				return strings.Join(strings.Fields(strings.TrimPrefix(l, prefix)), " "), nil
			}
		}
		return "", fmt.Errorf("/proc/%d/%s has no %q", pid, file, prefix)
	}
	expect := func(file, prefix, want string) func(int) error {
		return func(pid int) error {
			got, err := field(pid, file, prefix)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(got, want) {
				return fmt.Errorf("worker %s %q = %q, want %q", file, prefix, got, want)
			}
			return nil
		}
	}
	checks := []func(int) error{
		expect("status", "NoNewPrivs:", "1"),
		expect("status", "Threads:", ""),
		expect("limits", "Max data size", fmt.Sprintf("%d %d bytes", memoryBytes, memoryBytes)),
		expect("limits", "Max file size", "0 0 bytes"),
		expect("limits", "Max core file size", "0 0 bytes"),
		expect("limits", "Max open files", "64 64 files"),
		expect("environ", "", ""),
	}
	if os.Geteuid() == 0 {
		checks = append(checks, expect("status", "Uid:", "65534 65534 65534 65534"), expect("status", "CapEff:", "0000000000000000"))
	}
	return checks
}
