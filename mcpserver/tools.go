package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/pyjail/pyjail/mcpserver/tokens"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
)

// Tool names of SPEC §5. Clients depend on them.
const (
	toolRunPython       = "run_python"
	toolRunSandboxCode  = "run_sandbox_code"
	toolValidateJSON    = "validate_json"
	toolValidateCSV     = "validate_csv"
	toolCreateSnapshot  = "create_state_snapshot"
	toolListSnapshots   = "list_state_snapshots"
	toolRestoreSnapshot = "restore_state_snapshot"
	toolDeleteSnapshot  = "delete_state_snapshot"
	toolDiffSnapshot    = "diff_state_snapshot"
	toolWriteFile       = "write_workspace_file"
	toolReadFile        = "read_workspace_file"
	toolListFiles       = "list_workspace_files"
	toolListSessions    = "list_sessions"
	toolCloseSession    = "close_session"
	toolForkSession     = "fork_session"
)

// hints are a tool's annotations. Every field is set on every tool because
// mcp-go's defaults (destructive, open world) are wrong for all of them.
type hints struct {
	readOnly, destructive, idempotent bool
}

func (h hints) annotation(title string) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(h.readOnly),
		DestructiveHint: mcp.ToBoolPtr(h.destructive),
		IdempotentHint:  mcp.ToBoolPtr(h.idempotent),
		// Nothing here reaches beyond the host: jails have no network and
		// the other tools touch only the workspace and snapshot store.
		OpenWorldHint: mcp.ToBoolPtr(false),
	}
}

// newTool declares a tool whose input schema is the embedded file of the
// same name.
func newTool(name, title, description string, h hints) mcp.Tool {
	return mcp.Tool{
		Name:           name,
		Title:          title,
		Description:    description,
		RawInputSchema: rawSchema(name),
		Annotations:    h.annotation(title),
	}
}

// tools is the table of every tool (see pipeline.go): its definition,
// the right it needs, the stores it acts on, the lock it takes, the quota
// it counts against, the profile it runs code in, and its logic.
// Descriptions are written for the model choosing a tool: what it does,
// what it may not do, what comes back.
func (s *Server) tools() []toolSpec {
	var (
		readOnly = hints{readOnly: true, idempotent: true}
		// run_python changes nothing that outlives the call, but it is not
		// read-only in the MCP sense: it executes arbitrary code.
		runCalc      = hints{}
		runWorkspace = hints{destructive: true}
		creates      = hints{}
		overwrites   = hints{destructive: true, idempotent: true}
	)
	runPy := newTool(toolRunPython, "Run Python (calculator)",
		"Run Python in a fresh jail with no file system and no network. numpy as np, pandas as pd, scipy, sympy, math, statistics, datetime, decimal, fractions, itertools and collections are ready without import; os, sys, subprocess, socket and similar modules are blocked. Returns stdout, the value of the last expression, and a record with the verdict (ok, error, rejected, timeout, cpu_limit, memory_limit, output_limit, internal_error), timings and memory. matplotlib figures come back as PNG images. With session (a short name), calls with the same name run in one interpreter, like notebook cells: variables, imports and /tmp persist; every result says whether the session is new, preserved or lost (and why).",
		runCalc)
	runPy.RawOutputSchema = rawSchema(runOutputSchema)
	runWS := newTool(toolRunSandboxCode, "Run Python in the workspace",
		"Run Python in a fresh jail with the shared workspace mounted read-write at /sandbox/workspace (the working directory). open() reaches only workspace files; exec, eval, dunder attributes and unapproved imports are rejected before running. Returns stdout, the last expression's value, and a record with the verdict, timings and the files created, modified and deleted. With session (a short name), calls with the same name run in one interpreter that sees the workspace live; restore_state_snapshot ends such sessions.",
		runWorkspace)
	runWS.RawOutputSchema = rawSchema(runOutputSchema)

	const (
		run = tokens.RightRun
		ws  = tokens.RightWorkspace
	)
	specs := []toolSpec{
		{Tool: runPy, right: run, quota: quotaRuns, profile: record.ProfileCalc,
			logic: logic(s.runCode)},
		{Tool: runWS, right: run, store: storeWorkspace, lock: lockShared, quota: quotaRuns, profile: record.ProfileWorkspace,
			logic: logic(s.runCode)},
		{Tool: newTool(toolListSessions, "List sessions",
			"List your Python sessions (the session argument of run_python and run_sandbox_code): name, tool, state (running, idle, or hibernated: saved to disk, resumed by its next call), created, last used, calls, memory now or checkpoint bytes, and when it expires if unused.",
			readOnly), right: run, logic: logic(s.listSessions)},
		{Tool: newTool(toolCloseSession, "Close a session",
			"End your Python session of that name in both run tools, live or hibernated, and free its memory and its checkpoint; its variables are gone, and the next call with the name starts a new session.",
			overwrites), right: run, logic: logic(s.closeSession)},
		{Tool: newTool(toolValidateJSON, "Validate JSON",
			"Validate JSON data against a registered schema (schema_name; see sandbox://schemas) or an inline JSON Schema (schema; drafts 4 to 2020-12). data may be a JSON value, a string holding JSON text, or {\"path\": \"file.json\"} for a workspace file. Returns valid and each error's instance location, keyword location and message. Invalid data is a normal result, not a tool error.",
			readOnly), workers: true, logic: logic(s.validateJSON)},
		{Tool: newTool(toolValidateCSV, "Validate CSV",
			"Validate CSV text (csv) or a workspace file (path, streamed) against a registered CSV schema (schema_name) or inline columns (name, type string|integer|number|boolean|date|datetime, required, nullable, unique, enum, pattern, min, max, min_length, max_length, format). Without either, checks structure only. Returns row and column counts and errors with row, column, code and message.",
			readOnly), logic: logic(s.validateCSV)},
		// Exclusive: a snapshot taken while a run writes would hold half
		// of what the run did.
		{Tool: newTool(toolCreateSnapshot, "Snapshot the workspace",
			"Save every file of the workspace (content, size, mtime, sha256) as a new snapshot and return its id.",
			creates), right: ws, store: storeSnapshots, lock: lockExclusive, logic: logic(s.createSnapshot)},
		// Listing reads only the store: no lock.
		{Tool: newTool(toolListSnapshots, "List snapshots",
			"List the workspace snapshots, newest first, with id, time, description, file count and size.",
			readOnly), right: ws, store: storeSnapshots, logic: logic(s.listSnapshots)},
		// Exclusive: no run or file write may see or touch a workspace
		// that is being restored.
		{Tool: newTool(toolRestoreSnapshot, "Restore a snapshot",
			"Make the workspace exactly what the snapshot recorded: files not in it are deleted, changed files rewritten, missing ones recreated, mtimes restored. All or nothing.",
			overwrites), right: ws, store: storeSnapshots, lock: lockExclusive, logic: logic(s.restoreSnapshot)},
		// A delete leaves the workspace alone, but across replicas the
		// exclusive lock is what keeps it from racing a restore of the
		// same snapshot, or the snapshot count of a create.
		{Tool: newTool(toolDeleteSnapshot, "Delete a snapshot",
			"Delete a snapshot. The workspace is not touched.",
			overwrites), right: ws, store: storeSnapshots, lock: lockExclusive, logic: logic(s.deleteSnapshot)},
		// Shared: the diff may overlap runs, but not a restore.
		{Tool: newTool(toolDiffSnapshot, "Compare with a snapshot",
			"List the workspace files added, removed and modified since the snapshot.",
			readOnly), right: ws, store: storeSnapshots, lock: lockShared, logic: logic(s.diffSnapshot)},
		// Shared, like a run: a write must not land in the middle of a
		// restore.
		{Tool: newTool(toolWriteFile, "Write a workspace file",
			"Create or replace a file in the workspace. content is UTF-8 text, or base64 with encoding=base64. Parent directories are created; paths must stay inside the workspace.",
			overwrites), right: ws, store: storeWorkspace, lock: lockShared, quota: quotaWorkspace, logic: logic(s.writeFile)},
		{Tool: newTool(toolReadFile, "Read a workspace file",
			"Read a file from the workspace, optionally a byte range (offset, length; at most 1 MiB per call). Text comes back as is, binary data as base64.",
			readOnly), right: ws, store: storeWorkspace, logic: logic(s.readFile)},
		{Tool: newTool(toolListFiles, "List workspace files",
			"List the files and directories under a workspace directory (default: all of it) with size, type and modification time.",
			readOnly), right: ws, store: storeWorkspace, logic: logic(s.listFiles)},
	}
	if _, ok := s.checkpointer(); ok {
		// Listed only where sessions hibernate (SPEC §11): forking copies
		// a checkpoint.
		specs = append(specs, toolSpec{Tool: newTool(toolForkSession, "Fork a session",
			"Copy your Python session (session) into a new session (new_session) in the run tools where it exists: the copy has its variables, functions and imports as they are now, and from here the two diverge. new_session must not exist yet.",
			creates), right: run, logic: logic(s.forkSession)})
	}
	if s.cfg.Packages != nil && s.cfg.Packages.Config.IndexURL != "" {
		// Listed only where the server installs packages (SPEC §13): a
		// client that sees them can use them.
		specs = append(specs, []toolSpec{
			{Tool: newTool(toolInstallPackages, "Install Python packages",
				"Install packages from the operator's package index into your own package layer, which your later run_python and run_sandbox_code calls (not yet session calls) import from (after the rootfs's packages: numpy, pandas and the rest cannot be replaced). packages are requirement strings such as \"tabulate==0.9.0\"; dependencies come too. Wheels only: a package with only a source distribution is refused, as is a file whose hash does not match the index. Bounded by your packages_bytes and packages quotas.",
				creates), right: run, logic: logic(s.installPackages)},
			{Tool: newTool(toolListPackages, "List installed packages",
				"List the distributions in your package layer (name, version, bytes) and your package quotas. The rootfs's own packages are in sandbox://environment.",
				readOnly), right: run, logic: logic(s.listPackages)},
			{Tool: newTool(toolRemovePackages, "Remove installed packages",
				"Remove distributions from your package layer by name (not their dependencies). Only what install_packages added can be removed.",
				overwrites), right: run, logic: logic(s.removePackages)},
		}...)
	}
	return specs
}

// ToolRight returns the right the tool needs, and false for a tool this
// server does not have: for a transport that must refuse a call before it
// reaches the server (HTTP 403 with insufficient_scope).
func (s *Server) ToolRight(name string) (tokens.Right, bool) {
	for _, sp := range s.specs {
		if sp.Tool.Name == name {
			return sp.right, true
		}
	}
	return 0, false
}

// argumentPhrases are the plain-word limits of arguments whose schema
// cannot say them (the maximum timeout is the profile's, and larger values
// are lowered to it rather than refused), by tool and argument.
func (s *Server) argumentPhrases() map[string]map[string]string {
	timeout := func(p policy.Profile) string {
		return fmt.Sprintf("timeout must be more than 0 s and at most %g s", p.Limits.MaxTimeout.D().Seconds())
	}
	return map[string]map[string]string{
		toolRunPython:      {"timeout": timeout(s.calc)},
		toolRunSandboxCode: {"timeout": timeout(s.workspace)},
	}
}

// structured builds a successful result with text for people and older
// clients and the same facts as structured content.
func structured(text string, v any) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: v,
	}
}

// jsonText renders v as indented JSON for resources.
func jsonText(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding JSON: %w", err)
	}
	return string(b), nil
}

// ctxErr returns a tool error when the call was cancelled before it
// finished, so that an abandoned call still gets a well-formed answer.
func ctxErr(ctx context.Context, tool string) *mcp.CallToolResult {
	if err := ctx.Err(); err != nil {
		return mcp.NewToolResultError(tool + ": call cancelled: " + err.Error())
	}
	return nil
}
