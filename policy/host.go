package policy

import "slices"

// Layer is one isolation layer as found on this host.
type Layer struct {
	// Name is stable: operators list it in policy.Config.AllowDegraded.
	Name string `json:"name"`
	// Active reports whether jails on this host get the layer.
	Active bool `json:"active"`
	// Required layers make the server refuse to run code when missing,
	// unless the operator allowed degrading them.
	Required bool   `json:"required"`
	Detail   string `json:"detail,omitempty"`
	// Fix tells an operator how to get the layer, when it is missing.
	Fix string `json:"fix,omitempty"`
}

// HostReport is what probing the host found (package jail probes it). It
// is plain data; Missing applies the operator's degrade allowances.
type HostReport struct {
	Layers []Layer `json:"layers"`
	// CgroupVersion is "v1", "hybrid" (v1 controllers plus an empty
	// cgroup2 tree) or "v2".
	CgroupVersion string `json:"cgroup_version"`
	// Controllers lists the usable controllers pyjail needs.
	Controllers    []string `json:"controllers"`
	SwapAccounting bool     `json:"swap_accounting"`
	// LandlockABI is the kernel's Landlock ABI version, 0 if none.
	LandlockABI int    `json:"landlock_abi"`
	Kernel      string `json:"kernel"`
}

// Missing returns the required layers that are not active and that the
// operator has not allowed to degrade.
func (h HostReport) Missing(allowDegraded []string) []Layer {
	var out []Layer
	for _, l := range h.Layers {
		if l.Required && !l.Active && !slices.Contains(allowDegraded, l.Name) {
			out = append(out, l)
		}
	}
	return out
}

// Layer returns the named layer.
func (h HostReport) Layer(name string) (Layer, bool) {
	for _, l := range h.Layers {
		if l.Name == name {
			return l, true
		}
	}
	return Layer{}, false
}

// Degraded returns the names of the inactive layers that the operator
// accepted through allowDegraded.
func (h HostReport) Degraded(allowDegraded []string) []string {
	var out []string
	for _, l := range h.Layers {
		if !l.Active && slices.Contains(allowDegraded, l.Name) {
			out = append(out, l.Name)
		}
	}
	return out
}
