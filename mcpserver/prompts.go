package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Prompt names of SPEC §5.
const (
	promptSecureScript = "generate_secure_script"
	promptDiagnose     = "diagnose_validation_error"
)

// renderRules renders the Python layer of a profile from policy's data, so
// that prompts and sandbox://environment state the rules actually in force.
func renderRules(prof policy.Profile) string {
	r := policy.PythonRulesForProfile(prof)
	if prof.Python == policy.LayerNone {
		return "- Full Python: only the kernel limits below apply."
	}
	var b strings.Builder
	if prof.Workspace {
		fmt.Fprintf(&b, "- The working directory is the workspace, %s; use relative paths. open() and library readers and writers reach only workspace files: \"..\", absolute paths elsewhere and symlinks leading out raise PermissionError.\n", record.WorkspaceMount)
	} else {
		b.WriteString("- There is no file system to use: only /tmp, which is discarded after the call.\n")
	}
	if len(r.Scope) > 0 {
		var scope []string
		for _, m := range r.Scope {
			if m.Name == m.Module {
				scope = append(scope, m.Name)
			} else {
				scope = append(scope, m.Module+" as "+m.Name)
			}
		}
		fmt.Fprintf(&b, "- Already in scope without import: %s. Submodules of allowed packages can be imported.\n", strings.Join(scope, ", "))
	}
	fmt.Fprintf(&b, "- Importing these modules is blocked on every import path, as is any module with a name part starting with \"_\": %s.\n", entryNames(r.DeniedModules))
	if len(r.Builtins) > 0 {
		fmt.Fprintf(&b, "- Builtins are a whitelist: %s", entryNames(r.Builtins))
		if r.BuiltinExceptions {
			b.WriteString(", and the builtin exception classes")
		}
		b.WriteString(".\n")
	}
	if len(r.DeniedBuiltins) > 0 {
		fmt.Fprintf(&b, "- Not available: %s.\n", entryNames(r.DeniedBuiltins))
	}
	b.WriteString("- Dunder and private attributes and names (__class__, __globals__, _x) are refused, except the usual protocol methods.\n")
	ids := make([]string, len(r.Rules))
	for i, rule := range r.Rules {
		ids[i] = rule.ID + " " + rule.Title
	}
	fmt.Fprintf(&b, "- A refusal names its rule: %s.\n", strings.Join(ids, "; "))
	b.WriteString("- There is no network.")
	return b.String()
}

// entryNames joins the names of policy entries.
func entryNames(es []policy.PythonEntry) string {
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// active limits, so a model writes code for this server, not a generic one.
func (s *Server) addPrompts() {
	s.mcp.AddPrompt(mcp.NewPrompt(promptSecureScript,
		mcp.WithPromptDescription("Ask for a Python script for a task that obeys this server's sandbox rules and limits, ready for run_python or run_sandbox_code."),
		mcp.WithArgument("task", mcp.RequiredArgument(), mcp.ArgumentDescription("What the script should do."))),
		s.secureScriptPrompt)
	s.mcp.AddPrompt(mcp.NewPrompt(promptDiagnose,
		mcp.WithPromptDescription("Ask for a diagnosis of why a payload fails a registered schema, and for a corrected payload."),
		mcp.WithArgument("schema_name", mcp.RequiredArgument(), mcp.ArgumentDescription("A registered schema, see sandbox://schemas.")),
		mcp.WithArgument("payload", mcp.RequiredArgument(), mcp.ArgumentDescription("The JSON payload that failed validation.")),
		mcp.WithArgument("errors", mcp.ArgumentDescription("The errors validate_json reported, if any."))),
		s.diagnosePrompt)
}

// requireArgs returns the named prompt arguments, or an error naming every
// missing one: mcp-go does not enforce RequiredArgument.
func requireArgs(req mcp.GetPromptRequest, names ...string) (map[string]string, error) {
	var missing []string
	for _, n := range names {
		if strings.TrimSpace(req.Params.Arguments[n]) == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: prompt %s: missing required argument(s): %s",
			mcp.ErrInvalidParams, req.Params.Name, strings.Join(missing, ", "))
	}
	return req.Params.Arguments, nil
}

// secureScriptPrompt builds generate_secure_script: the task, then each
// run tool's rules and limits, then what a good answer looks like.
func (s *Server) secureScriptPrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, err := requireArgs(req, "task")
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Write a Python 3 script for this task:\n\n%s\n\n", args["task"])
	b.WriteString("It will run in pyjail, a throwaway Linux jail per call; nothing survives between calls except workspace files. Use run_python for computation, or run_sandbox_code if the task needs files.\n\n")
	for _, p := range []struct {
		tool string
		prof policy.Profile
	}{{toolRunPython, s.calc}, {toolRunSandboxCode, s.workspace}} {
		fmt.Fprintf(&b, "Rules of %s (%s profile):\n%s\n", p.tool, p.prof.Name, renderRules(p.prof))
		l := p.prof.Limits
		fmt.Fprintf(&b, "- Limits: %s wall-clock by default (at most %s), %s of memory, %d processes/threads, %g CPU, %s of output per stream, %s of code, %s in /tmp. Going over a limit ends the run with a named verdict (timeout, memory_limit, output_limit, ...).\n\n",
			l.Timeout.D(), l.MaxTimeout.D(), policy.FormatBytes(l.MemoryBytes), l.Pids, l.CPUs, policy.FormatBytes(l.OutputBytes), policy.FormatBytes(l.CodeBytes), policy.FormatBytes(l.TmpBytes))
	}
	b.WriteString("Write code that stays within these rules rather than code that tries to get around them: a rejected or killed run only wastes a call. Print the results you need, or end with an expression whose value should be returned. Reply with the code in one ```python block and a one-line note on which tool to run it with.")
	return mcp.NewGetPromptResult("A sandbox-safe script for: "+truncate(args["task"], 80),
		[]mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(b.String()))}), nil
}

// diagnosePrompt builds diagnose_validation_error. The registered schema's
// source is included so that the diagnosis rests on the real rules; an
// unknown name is said so rather than refused, since the model can still
// help.
func (s *Server) diagnosePrompt(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, err := requireArgs(req, "schema_name", "payload")
	if err != nil {
		return nil, err
	}
	name := args["schema_name"]
	var b strings.Builder
	fmt.Fprintf(&b, "A JSON payload fails validation against the schema %q.\n\n", name)
	if src, ok := s.validators.Source(name); ok {
		fmt.Fprintf(&b, "The schema (%s%s):\n```json\n%s\n```\n\n", uriSchemaPre, name, src)
	} else {
		fmt.Fprintf(&b, "No schema named %q is registered on this server (registered: %s); say so, and diagnose the payload against the schema the name suggests.\n\n",
			name, strings.Join(s.validators.Names(), ", "))
	}
	fmt.Fprintf(&b, "The payload:\n```json\n%s\n```\n\n", args["payload"])
	if e := strings.TrimSpace(args["errors"]); e != "" {
		fmt.Fprintf(&b, "The validator reported:\n```\n%s\n```\n\n", e)
	} else {
		fmt.Fprintf(&b, "No errors were given: call validate_json with schema_name %q and this payload to get them.\n\n", name)
	}
	b.WriteString("Explain each problem in plain words (which field, what the schema requires, what the payload has), then give a corrected payload in one ```json block that keeps the payload's intent and changes as little as possible. Finally, check the corrected payload with validate_json.")
	return mcp.NewGetPromptResult("Diagnose a payload that fails schema "+name,
		[]mcp.PromptMessage{mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(b.String()))}), nil
}
