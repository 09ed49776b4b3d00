//go:build linux && cgo

package jail

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pyjail/pyjail/record"
)

// Environment runs the probe in a fresh jail and decodes its answer.
func (j *Jail) Environment(ctx context.Context) (*Environment, error) {
	res, err := j.Run(ctx, record.Request{Profile: record.ProfileFull, Code: environmentProbe, Timeout: 30 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("probing the jail's Python: %w", err)
	}
	if res.Verdict != record.VerdictOK {
		return nil, fmt.Errorf("probing the jail's Python: %s: %s %s", res.Verdict, res.Message, res.Stderr)
	}
	var env Environment
	if err := json.Unmarshal([]byte(res.Stdout), &env); err != nil {
		return nil, fmt.Errorf("decoding the environment probe: %w", err)
	}
	env.Rootfs = fmt.Sprintf("%s (%s)", j.cfg.Rootfs.Kind, j.cfg.Rootfs.Root)
	return &env, nil
}
