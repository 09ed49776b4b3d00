package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

func TestEgressLayer(t *testing.T) {
	cfg := policy.Default()
	if l := egressLayer(t.Context(), cfg); !l.Active || !strings.Contains(l.Detail, "no profile has egress") {
		t.Errorf("without egress: %+v", l)
	}
	calc := cfg.Profiles[record.ProfileCalc]
	calc.Egress = &policy.Egress{Rules: []policy.EgressRule{
		{Host: "data.example.org"},
		{Host: "api.example.com", Upstream: policy.UpstreamHTTPS, Inject: []policy.Inject{{Header: "Authorization", Env: "PYJAIL_DOCTOR_TEST_KEY"}}},
	}}
	cfg.Profiles = maps.Clone(cfg.Profiles)
	cfg.Profiles[record.ProfileCalc] = calc

	t.Setenv("PYJAIL_DOCTOR_TEST_KEY", "")
	l := egressLayer(t.Context(), cfg)
	if l.Active || !strings.Contains(l.Detail, "PYJAIL_DOCTOR_TEST_KEY is empty or unset") || l.Fix == "" {
		t.Errorf("with an unset inject source: %+v", l)
	}
	const secret = "sk-doctor-9f1e"
	t.Setenv("PYJAIL_DOCTOR_TEST_KEY", secret)
	l = egressLayer(t.Context(), cfg)
	if !l.Active || !strings.Contains(l.Detail, "gateway decided a self-test request") || !strings.Contains(l.Detail, "calc → data.example.org, api.example.com") {
		t.Errorf("with egress: %+v", l)
	}
	if strings.Contains(l.Detail+l.Fix, secret) {
		t.Errorf("the layer shows the inject value: %+v", l)
	}
}
