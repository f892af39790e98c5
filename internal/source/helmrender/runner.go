// Package helmrender renders Helm charts in child processes, each bounded in memory,
// time and output, so that no chart can take the operator down with it.
//
// Helm's template engine runs whatever a chart says: `{{ repeat 1500000000 "x" }}`
// allocates gigabytes at once, and a loop can run for ever; the engine takes no context
// and no budget. As Argo CD renders in its repo-server, apart from its controller, Vidra
// renders each chart in a process of its own (the operator's binary, `render-helm`),
// whose address space is bounded (RLIMIT_AS) and which is killed at its deadline. A chart
// over either bound fails its sync, not the operator.
package helmrender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/vidra-operator/vidra/internal/runtime/bytesize"
	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

// Defaults of Options.
const (
	DefaultMaxMemory = 256 << 20
	DefaultTimeout   = 30 * time.Second
	DefaultProcesses = 2
)

// Options configure a Runner; a field that is zero takes its default.
type Options struct {
	// Command is the child's argv before its flags: the operator's binary and Command.
	Command []string
	// MaxMemory bounds each child's memory, in bytes: what its address space may grow
	// by once the Go runtime has started.
	MaxMemory int64
	// Timeout bounds each rendering.
	Timeout time.Duration
	// Processes bounds how many children run at once: together they may take
	// Processes × MaxMemory beside the operator.
	Processes int
}

// Runner renders charts in child processes; it is safe for concurrent use.
type Runner struct {
	command   []string
	maxMemory int64
	timeout   time.Duration
	slots     chan struct{}
}

// New returns a Runner.
func New(opts Options) (*Runner, error) {
	if len(opts.Command) == 0 {
		return nil, errors.New("helm render: no command to run")
	}
	r := &Runner{command: opts.Command, maxMemory: opts.MaxMemory, timeout: opts.Timeout}
	if r.maxMemory <= 0 {
		r.maxMemory = DefaultMaxMemory
	}
	if r.timeout <= 0 {
		r.timeout = DefaultTimeout
	}
	if opts.Processes <= 0 {
		opts.Processes = DefaultProcesses
	}
	r.slots = make(chan struct{}, opts.Processes)
	return r, nil
}

// Bounds of a rendering, as a LimitError names them.
const (
	BoundMemory = "memory"
	BoundTime   = "time"
)

// LimitError is a rendering stopped at one of the Runner's bounds.
type LimitError struct {
	// Chart is "name version".
	Chart string
	// Bound is BoundMemory or BoundTime.
	Bound string
	Max   string
}

func (e *LimitError) Error() string {
	if e.Bound == BoundTime {
		return fmt.Sprintf("the rendering of %s took longer than %s and was stopped (--helm-render-timeout)", e.Chart, e.Max)
	}
	return fmt.Sprintf("the rendering of %s needed more than %s of memory and was stopped (--helm-render-max-memory)", e.Chart, e.Max)
}

// ProcessError is a rendering that failed for want of a working process, not for what
// the chart says: the process could not start, was killed from outside, or answered
// nothing readable. Another try may pass.
type ProcessError struct {
	Chart string
	Err   error
}

func (e *ProcessError) Error() string {
	return fmt.Sprintf("render %s: the render process: %v", e.Chart, e.Err)
}

func (e *ProcessError) Unwrap() error { return e.Err }

// errDeadline is the cause of a child's context when its own deadline passed.
var errDeadline = errors.New("the rendering's deadline passed")

// Render renders ch with opts in a child process, as helmsource.Render would.
func (r *Runner) Render(ctx context.Context, ch *chart.Chart, opts helmsource.RenderOptions) (helmsource.Rendered, error) {
	if ch == nil || ch.Metadata == nil {
		return helmsource.Rendered{}, errors.New("render: no chart")
	}
	name := strings.TrimSpace(ch.Name() + " " + ch.Metadata.Version)
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-ctx.Done():
		return helmsource.Rendered{}, &ProcessError{Chart: name, Err: fmt.Errorf("wait for a render process: %w", context.Cause(ctx))}
	}
	// Encoded once a slot is held, so that renderings waiting for one hold no copy.
	body, err := json.Marshal(request{Chart: toWire(ch), Options: opts})
	if err != nil {
		return helmsource.Rendered{}, fmt.Errorf("render %s: encode the request: %w", name, err)
	}
	out, err := r.run(ctx, name, body, opts.MaxBytes)
	if err != nil {
		return helmsource.Rendered{}, err
	}
	return decodeReply(name, out)
}

// run runs one child with body on its stdin, and returns its stdout.
func (r *Runner) run(ctx context.Context, name string, body []byte, maxBytes int) ([]byte, error) {
	cctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errDeadline)
	defer cancel()
	args := append(append([]string{}, r.command[1:]...), "--max-memory="+strconv.FormatInt(r.maxMemory, 10))
	cmd := exec.CommandContext(cctx, r.command[0], args...) //nolint:gosec // the operator's own binary
	// The child inherits nothing of the operator's environment: no credential there is
	// a template's to read.
	cmd.Env = []string{"GOTRACEBACK=none"}
	cmd.SysProcAttr = childAttributes()
	cmd.Stdin = bytes.NewReader(body)
	stdout := &capped{max: replyBound(maxBytes)}
	stderr := &headTail{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case err == nil && !stdout.over:
		return stdout.Bytes(), nil
	case errors.Is(context.Cause(cctx), errDeadline):
		return nil, &LimitError{Chart: name, Bound: BoundTime, Max: r.timeout.String()}
	case ctx.Err() != nil:
		return nil, &ProcessError{Chart: name, Err: context.Cause(ctx)}
	case outOfMemory(stderr.String()):
		return nil, &LimitError{Chart: name, Bound: BoundMemory, Max: bytesize.Format(r.maxMemory)}
	case stdout.over:
		return nil, &helmsource.LimitError{What: "the rendering of " + name, Limit: helmsource.LimitBundleBytes, Max: int64(maxBytes)}
	}
	return nil, &ProcessError{Chart: name, Err: fmt.Errorf("%w: %s", err, lastLine(stderr.String()))}
}

func decodeReply(name string, out []byte) (helmsource.Rendered, error) {
	var rep reply
	if err := json.Unmarshal(out, &rep); err != nil {
		return helmsource.Rendered{}, &ProcessError{Chart: name, Err: fmt.Errorf("its reply: %w", err)}
	}
	switch {
	case rep.Limit != nil:
		return helmsource.Rendered{}, &helmsource.LimitError{What: rep.Limit.What, Limit: rep.Limit.Limit, Max: rep.Limit.Max, Err: errors.New(rep.Error)}
	case rep.Error != "":
		return helmsource.Rendered{}, errors.New(rep.Error)
	}
	return helmsource.Rendered{Manifest: rep.Manifest, Dropped: rep.Dropped}, nil
}

// replyBound is the most a reply holding a bundle of maxBytes may take: its JSON
// (base64, a third more) and room for the hooks dropped and an error. Without a bound,
// a bundle is as large as the content store keeps (64 MiB).
func replyBound(maxBytes int) int {
	if maxBytes <= 0 {
		maxBytes = 64 << 20
	}
	return maxBytes/3*4 + 1<<20
}

// outOfMemory tells a child the Go runtime stopped for want of memory.
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")
}

// lastLine is the last non-empty line of s, for an error message.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// headTail keeps the first and the last max bytes written to it: a Go runtime's fatal
// error is at the head of what it writes, after whatever was written before it.
type headTail struct {
	head, tail []byte
	max        int
}

func (t *headTail) Write(p []byte) (int, error) {
	n := len(p)
	if room := t.max - len(t.head); room > 0 {
		take := min(room, len(p))
		t.head, p = append(t.head, p[:take]...), p[take:]
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return n, nil
}

// String is the head, then the tail.
func (t *headTail) String() string { return string(t.head) + string(t.tail) }

// capped keeps the first max bytes written to it, and says whether more came.
type capped struct {
	bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); len(p) > room {
		c.over = true
		c.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
