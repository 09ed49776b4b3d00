//go:build linux && cgo

package jail

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pyjail/pyjail/jail/pyrunner"
	"github.com/pyjail/pyjail/policy"
	"github.com/pyjail/pyjail/record"
	"github.com/pyjail/pyjail/rootfs"
)

// Hibernation (SPEC §11, issue 24). Where the server has a checkpoint
// store (Config.Checkpoints), a session can outlive its jail: the runner
// saves the user's state inside the jail, as a call of the session under
// the fence of user code (checkpoint.py), the supervisor stores the bytes
// without ever reading them, and the jail is freed. The next call of the
// key forks a fresh session jail, hands it the bytes to load, again as a
// call under the fence, and then runs its code: state resumed, with what
// came back and what did not.
//
// When: an idle session hibernates after sessions.hibernate_after (the
// reaper); the session caps and the memory budget hibernate the sessions
// they would have evicted (evicted only when the checkpoint fails or is
// refused); Pool.Close hibernates every idle session; and with
// sessions.checkpoint every_call, a checkpoint follows every call, so that
// a server killed outright loses no call. A checkpoint refused for its
// size or the owner's quota leaves an idle session live.
//
// A session is live in one server process at a time: its jail holds the
// store's cross-process hold on the key (record.CheckpointStore.Hold) from
// before it loads a checkpoint until it has saved its last one or ended,
// and a call that finds the key held elsewhere is refused, never run on a
// second copy of the state. A process that dies drops its holds, so
// another replica resumes the key from its last checkpoint.
//
// Which checkpoints stay: hibernated and server_restart ends keep the
// key's checkpoint (its next call resumes it); every other end (a timeout,
// a limit, a crash, closed, restored, expired, evicted) deletes it, so the
// next call reports state lost as before.

const (
	// checkpointTimeout bounds a checkpoint or a restore: the wall time
	// and, as for a call, the CPU time of the jail.
	checkpointTimeout = 60 * time.Second
	// checkpointDrain bounds, after the runner's reply, the wait for the
	// end of the checkpoint pipe (a process the session left running in
	// layer none may hold its end).
	checkpointDrain = 2 * time.Second
)

var (
	// errIncompatibleCheckpoint: the runner refused a checkpoint made by
	// another format or Python.
	errIncompatibleCheckpoint = errors.New("incompatible checkpoint")
	// errCheckpointTooLarge: the runner wrote more than
	// sessions.max_checkpoint_bytes.
	errCheckpointTooLarge = errors.New("checkpoint too large")
)

// rootfsIdentity names the tree jails run on, for checkpoints: the
// sha256 of a built rootfs's manifest, or the interpreter's path for a
// host layout. A checkpoint made on another tree (another set of
// packages) is not loaded: its pickles may name what this tree lacks.
func rootfsIdentity(l *rootfs.Layout) string {
	if l == nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(l.Root, ".pyjail-manifest.json"))
	if err != nil {
		return string(l.Kind) + ":" + l.Python
	}
	sum := sha256.Sum256(b)
	return "rootfs:" + hex.EncodeToString(sum[:12])
}

// op runs a checkpoint or restore op in the session's jail, with the turn
// held: the call's pipes and the checkpoint pipe go to the runner on its
// sync socket, the Exec line names the op, and the supervisor reads the
// checkpoint from the pipe (OpCheckpoint, at most limit bytes if limit >
// 0) or writes in to it (OpRestore) while the runner works. The jail is
// left thawed (frozen for a workspace session, as after any call). An
// error other than errIncompatibleCheckpoint or a refusal in the reply
// means the jail is dead or was killed.
func (s *session) op(ctx context.Context, inst *instance, op string, in []byte, limit int64) ([]byte, *pyrunner.CheckpointReply, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("creating the checkpoint pipe: %w", err)
	}
	mine, theirs := r, w
	if op == pyrunner.OpRestore {
		mine, theirs = w, r
	}
	err = s.startCall(inst, checkpointTimeout, theirs)
	theirs.Close()
	if err != nil {
		mine.Close()
		return nil, nil, fmt.Errorf("starting the %s in session jail %q: %w", op, inst.id, err)
	}
	var blob []byte
	var ioErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer mine.Close()
		if op == pyrunner.OpRestore {
			_, ioErr = mine.Write(in)
			return
		}
		src := io.Reader(mine)
		if limit > 0 {
			src = io.LimitReader(mine, limit+1)
		}
		blob, ioErr = io.ReadAll(src)
		if limit > 0 && int64(len(blob)) > limit {
			// Closing our end makes the runner's next write fail: it
			// stops and replies.
			blob, ioErr = nil, fmt.Errorf("%w: more than sessions.max_checkpoint_bytes (%s)", errCheckpointTooLarge, policy.FormatBytes(limit))
		}
	}()
	if err := writeJSONLine(inst.ctlIn, pyrunner.Exec{Seq: inst.seq, Op: op}); err != nil {
		inst.body.kill()
		<-done
		return nil, nil, fmt.Errorf("sending the %s to %q: %w", op, inst.id, err)
	}
	out, err := inst.await(ctx, checkpointTimeout)
	if err == nil && out.reply == nil {
		err = fmt.Errorf("the session's jail ended during the %s (%s)", op, describeOutcome(out))
	}
	if err != nil {
		inst.body.kill()
		<-done
		return nil, nil, err
	}
	select {
	case <-done:
	case <-time.After(checkpointDrain):
		mine.Close()
		<-done
	}
	rep := out.reply
	switch {
	case errors.Is(ioErr, errCheckpointTooLarge):
		return nil, nil, ioErr
	case rep.Status == pyrunner.StatusIncompatible:
		return nil, nil, fmt.Errorf("%w: %s", errIncompatibleCheckpoint, rep.Message)
	case rep.Status != pyrunner.StatusOK || rep.Checkpoint == nil:
		msg := rep.Message
		if msg == "" {
			msg = rep.Exception
		}
		return nil, nil, fmt.Errorf("the runner's %s failed (%s): %s", op, rep.Status, msg)
	case ioErr != nil:
		return nil, nil, fmt.Errorf("the checkpoint pipe: %w", ioErr)
	}
	return blob, rep.Checkpoint, nil
}

// describeOutcome says in a few words why a jail ended without a reply.
func describeOutcome(out outcome) string {
	switch {
	case out.timedOut:
		return "it took longer than " + checkpointTimeout.String()
	case out.cpuKilled:
		return "CPU-time limit"
	case out.flooded:
		return "output limit"
	case out.exited:
		if out.done.signal != "" {
			return "killed by " + out.done.signal
		}
		return fmt.Sprintf("exit status %d", out.done.code)
	}
	return "no reply"
}

// checkpoint saves s's state as key's checkpoint (turn held). The jail
// stays live.
func (t *sessionTable) checkpoint(ctx context.Context, s *session, key string) error {
	return t.checkpointAs(ctx, s, key, time.Time{})
}

// checkpointAs is checkpoint with the session's creation time replaced
// by created, unless zero (a fork starts a new session's age).
func (t *sessionTable) checkpointAs(ctx context.Context, s *session, key string, created time.Time) error {
	st := t.p.j.cfg.Checkpoints
	blob, rep, err := s.op(ctx, s.inst, pyrunner.OpCheckpoint, nil, t.cfg.MaxCheckpointBytes)
	if err != nil {
		return err
	}
	t.mu.Lock()
	calls := s.calls
	if created.IsZero() {
		created = s.created
	}
	t.mu.Unlock()
	cp := &record.Checkpoint{
		Blob: blob, Profile: s.k.profile, Created: time.Now().UTC(), Calls: calls,
		Saved: rep.Saved, Skipped: rep.Skipped, Python: rep.Python, Rootfs: t.p.j.rootfsID, SessionCreated: created.UTC(),
	}
	if err := st.Save(s.k.profile, key, cp); err != nil {
		return err
	}
	t.p.j.log.Info("session checkpoint saved", logKeyID, s.inst.id, logKeyProfile, s.k.profile, "bytes", len(blob), "calls", calls, "saved", len(rep.Saved), "skipped", fmt.Sprint(rep.Skipped))
	return nil
}

// checkpoints reports whether s's state may be saved: the server has a
// store and the store took the key's hold when the session began.
func (t *sessionTable) checkpoints(s *session) bool {
	return t.p.j.cfg.Checkpoints != nil && s.hold != nil
}

// hold takes the store's hold on s's key for its life, before it loads
// a checkpoint. A key held by another process refuses the call; a key the
// store cannot place (an owner without a directory) lives without
// checkpoints.
func (t *sessionTable) hold(s *session) error {
	st := t.p.j.cfg.Checkpoints
	if st == nil {
		return nil
	}
	release, err := st.Hold(s.k.profile, s.k.key)
	switch {
	case errors.Is(err, record.ErrSessionElsewhere):
		return fmt.Errorf("%w: session %q is live on another server sharing this data directory; its calls go there until it hibernates or that server stops", record.ErrSessionElsewhere, s.k.key)
	case err != nil:
		t.p.j.log.Debug("session without checkpoints", "key", s.k.key, "err", err)
		return nil
	}
	s.hold = release
	return nil
}

// loadCheckpoint returns the key's checkpoint to resume from, or nil; it
// deletes one that cannot be used and says why in state (lost with its
// reason).
func (t *sessionTable) loadCheckpoint(s *session, state *record.SessionState) *record.Checkpoint {
	if !t.checkpoints(s) {
		return nil
	}
	st := t.p.j.cfg.Checkpoints
	cp, err := st.Load(s.k.profile, s.k.key)
	lose := func(reason record.SessionReason) *record.Checkpoint {
		_ = st.Delete(s.k.profile, s.k.key)
		state.State, state.Reason = record.SessionLost, reason
		return nil
	}
	switch {
	case errors.Is(err, record.ErrNoCheckpoint):
		return nil
	case errors.Is(err, record.ErrCorruptCheckpoint):
		t.p.j.log.Warn("session checkpoint corrupt; not loaded", "key", s.k.key, "err", err)
		return lose(record.ReasonCorruptCheckpoint)
	case err != nil:
		t.p.j.log.Warn("reading a session checkpoint; the session starts afresh", "key", s.k.key, "err", err)
		state.State, state.Reason = record.SessionLost, record.ReasonInternalError
		return nil
	case cp.Rootfs != t.p.j.rootfsID:
		return lose(record.ReasonIncompatibleCheckpoint)
	case time.Since(cp.SessionCreated) >= t.cfg.MaxAge.D():
		return lose(record.ReasonExpired)
	}
	return cp
}

// restore loads cp into the fresh jail of s (turn held) and turns state
// into resumed. On failure the jail is unusable or its state partial: it
// reports the reason the key's state is lost, and the caller forks again.
func (t *sessionTable) restore(ctx context.Context, s *session, inst *instance, cp *record.Checkpoint, state *record.SessionState) (record.SessionReason, error) {
	_, rep, err := s.op(ctx, inst, pyrunner.OpRestore, cp.Blob, 0)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		reason := record.ReasonInternalError
		if errors.Is(err, errIncompatibleCheckpoint) {
			reason = record.ReasonIncompatibleCheckpoint
		}
		t.p.j.log.Warn("restoring a session checkpoint failed", logKeyID, inst.id, "reason", string(reason), "err", err)
		_ = t.p.j.cfg.Checkpoints.Delete(s.k.profile, s.k.key)
		return reason, nil
	}
	interrupted := state.State == record.SessionLost && state.Reason == record.ReasonServerRestart
	*state = record.SessionState{
		Name: s.k.key, State: record.SessionResumed, Calls: cp.Calls + 1,
		Resumed: &record.Resume{
			// What the checkpoint could not hold, then what failed to load.
			CheckpointAt: cp.Created, Calls: cp.Calls, Restored: rep.Restored, NotRestored: append(slices.Clip(cp.Skipped), rep.NotRestored...),
			Interrupted: interrupted,
		},
	}
	t.mu.Lock()
	s.calls, s.created = cp.Calls, cp.SessionCreated
	t.mu.Unlock()
	t.p.j.log.Info("session resumed", logKeyID, inst.id, "calls", cp.Calls, "restored", len(rep.Restored), "not_restored", len(rep.NotRestored))
	return "", nil
}

// dropCheckpoints deletes the stored checkpoints of the profiles profile
// selects whose key is key (exact) or starts with it, unless a server
// holds the key live, and remembers reason for each key's next call. It
// reports how many it deleted.
func (t *sessionTable) dropCheckpoints(profile func(record.Profile) bool, key string, exact bool, reason record.SessionReason) int {
	st := t.p.j.cfg.Checkpoints
	if st == nil {
		return 0
	}
	n := 0
	for _, name := range t.p.j.cfg.Policy.ProfileNames() {
		if !profile(name) {
			continue
		}
		var keys []string
		if exact {
			if _, err := st.Stat(name, key); err == nil {
				keys = append(keys, key)
			}
		} else {
			infos, err := st.List(name, key)
			if err != nil {
				t.p.j.log.Warn("listing session checkpoints", "prefix", key, "err", err)
			}
			for _, in := range infos {
				keys = append(keys, in.Key)
			}
		}
		for _, k := range keys {
			release, err := st.Hold(name, k)
			if err != nil {
				continue // live here or on another server: its end is its own
			}
			if st.Delete(name, k) == nil {
				n++
				t.mu.Lock()
				t.rememberLocked(sessionKey{name, k}, reason)
				t.mu.Unlock()
			}
			release()
		}
	}
	return n
}

// hibernated lists the stored checkpoints whose keys start with prefix
// and that have no live session here.
func (t *sessionTable) hibernated(prefix string, live map[sessionKey]bool) []record.SessionInfo {
	st := t.p.j.cfg.Checkpoints
	if st == nil {
		return nil
	}
	var out []record.SessionInfo
	for _, name := range t.p.j.cfg.Policy.ProfileNames() {
		infos, err := st.List(name, prefix)
		if err != nil {
			t.p.j.log.Warn("listing session checkpoints", "prefix", prefix, "err", err)
		}
		for _, in := range infos {
			if live[sessionKey{name, in.Key}] {
				continue
			}
			out = append(out, record.SessionInfo{
				Key: in.Key, Profile: name, Created: in.SessionCreated, LastUsed: in.Created, Calls: in.Calls,
				ExpiresAt: in.SessionCreated.Add(t.cfg.MaxAge.D()), Hibernated: true, CheckpointBytes: in.Bytes,
			})
		}
	}
	return out
}

// ForkSession copies the state of session src into a new session dst, in
// every profile where src exists: a live session is checkpointed into
// dst's key (it stays live), a hibernated one's checkpoint is copied. The
// two diverge from here; dst's first call resumes it. It reports the
// profiles forked; dst must not exist in them.
func (p *Pool) ForkSession(ctx context.Context, src, dst string) ([]record.Profile, error) {
	t := p.sessions
	st := p.j.cfg.Checkpoints
	if st == nil {
		return nil, fmt.Errorf("%w: forking a session needs checkpoints, which this server does not keep (no data or state directory for them)", ErrSessionsUnavailable)
	}
	if src == dst {
		return nil, errors.New("a session cannot be forked into itself: give new_session another name")
	}
	var forked []record.Profile
	for _, name := range p.j.cfg.Policy.ProfileNames() {
		ks, kd := sessionKey{name, src}, sessionKey{name, dst}
		t.mu.Lock()
		s, dlive := t.live[ks], t.live[kd] != nil
		t.mu.Unlock()
		_, serr := st.Stat(name, src)
		if s == nil && serr != nil {
			continue
		}
		if _, err := st.Stat(name, dst); dlive || err == nil {
			return forked, fmt.Errorf("session %q exists already (profile %s): close it first or fork into another name", sessionName(dst), name)
		}
		release, err := st.Hold(name, dst)
		if err != nil {
			return forked, fmt.Errorf("session %q: %w", sessionName(dst), err)
		}
		err = t.forkInto(ctx, s, name, src, dst)
		release()
		if err != nil {
			return forked, err
		}
		forked = append(forked, name)
	}
	if len(forked) == 0 {
		return nil, fmt.Errorf("%w: no session %q, live or hibernated", ErrNoSession, sessionName(src))
	}
	return forked, nil
}

// forkInto writes dst's checkpoint from src: from its live jail s, or
// from its stored checkpoint.
func (t *sessionTable) forkInto(ctx context.Context, s *session, profile record.Profile, src, dst string) error {
	st := t.p.j.cfg.Checkpoints
	if s != nil {
		if err := s.acquire(ctx); err != nil {
			return err
		}
		t.mu.Lock()
		gone := s.gone
		t.mu.Unlock()
		if !gone {
			err := t.checkpointAs(ctx, s, dst, time.Now())
			if s.inst.dead() {
				t.end(s, record.ReasonInternalError)
			} else {
				t.settles.Add(1)
				t.settle(s)
			}
			if err != nil {
				return fmt.Errorf("checkpointing session %q: %w", sessionName(src), err)
			}
			return nil
		}
		s.release()
	}
	cp, err := st.Load(profile, src)
	if err != nil {
		return fmt.Errorf("reading session %q's checkpoint: %w", sessionName(src), err)
	}
	cp.SessionCreated = time.Now().UTC()
	return st.Save(profile, dst, cp)
}

// sessionName is the name part of a key, for messages to its owner.
func sessionName(key string) string {
	if _, name, ok := strings.Cut(key, "/"); ok {
		return name
	}
	return key
}
