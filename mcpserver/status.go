package mcpserver

import (
	"fmt"
	"strings"
)

// refusal explains why code must not run on this host, or returns "" when
// it may. Fail closed: a host that was never probed is refused too.
func (s *Server) refusal() string {
	h := s.cfg.Host
	if len(h.Layers) == 0 {
		return "refusing to run code: the host's isolation layers were not probed, so the jail cannot be trusted. " +
			"Run `pyjail doctor` to see what is missing."
	}
	missing := h.Missing(s.cfg.Policy.AllowDegraded)
	if len(missing) == 0 {
		return ""
	}
	var b strings.Builder
	names := make([]string, len(missing))
	for i, l := range missing {
		names[i] = l.Name
	}
	fmt.Fprintf(&b, "refusing to run code: required isolation layers are missing on this host: %s.", strings.Join(names, ", "))
	for _, l := range missing {
		fmt.Fprintf(&b, "\n- %s", l.Name)
		if l.Detail != "" {
			fmt.Fprintf(&b, ": %s", l.Detail)
		}
		if l.Fix != "" {
			fmt.Fprintf(&b, " Fix: %s", l.Fix)
		}
	}
	fmt.Fprintf(&b, "\nThe operator can fix the host (see `pyjail doctor`) or accept the risk by listing the layers in allow_degraded in the config file.")
	return b.String()
}
