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

	"github.com/vidra-operator/vidra/internal/bytesize"
	"github.com/vidra-operator/vidra/internal/helmsource"
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

// errDeadline is the cause of a child's context when its own deadline passed.
var errDeadline = errors.New("the rendering's deadline passed")

// Render renders ch with opts in a child process, as helmsource.Render would.
func (r *Runner) Render(ctx context.Context, ch *chart.Chart, opts helmsource.RenderOptions) (helmsource.Rendered, error) {
	if ch == nil || ch.Metadata == nil {
		return helmsource.Rendered{}, errors.New("render: no chart")
	}
	name := strings.TrimSpace(ch.Name() + " " + ch.Metadata.Version)
	body, err := json.Marshal(request{Chart: toWire(ch), Options: opts})
	if err != nil {
		return helmsource.Rendered{}, fmt.Errorf("render %s: encode the request: %w", name, err)
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-ctx.Done():
		return helmsource.Rendered{}, fmt.Errorf("render %s: wait for a render process: %w", name, context.Cause(ctx))
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
	cmd.Env = []string{"GOTRACEBACK=single"}
	cmd.Stdin = bytes.NewReader(body)
	stdout := &capped{max: replyBound(maxBytes)}
	stderr := &capped{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case errors.Is(context.Cause(cctx), errDeadline):
		return nil, &LimitError{Chart: name, Bound: BoundTime, Max: r.timeout.String()}
	case ctx.Err() != nil:
		return nil, fmt.Errorf("render %s: %w", name, context.Cause(ctx))
	case outOfMemory(stderr.String()):
		return nil, &LimitError{Chart: name, Bound: BoundMemory, Max: bytesize.Format(r.maxMemory)}
	case stdout.over:
		return nil, &helmsource.LimitError{What: "the rendering of " + name, Limit: "MaxBundleBytes", Max: int64(maxBytes)}
	case err != nil:
		return nil, fmt.Errorf("render %s: the render process failed: %w: %s", name, err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func decodeReply(name string, out []byte) (helmsource.Rendered, error) {
	var rep reply
	if err := json.Unmarshal(out, &rep); err != nil {
		return helmsource.Rendered{}, fmt.Errorf("render %s: the render process's reply: %w", name, err)
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
// (base64, a third more) and room for the hooks dropped and an error.
func replyBound(maxBytes int) int {
	if maxBytes <= 0 {
		maxBytes = 256 << 20
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
