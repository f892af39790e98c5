package helmrender

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/vidra-operator/vidra/internal/source/helmsource"
)

// Command is the operator's subcommand that runs a child: `vidra render-helm`.
const Command = "render-helm"

// renderNice is a child's scheduling priority: well below the operator's (0), as a
// batch job's.
const renderNice = 10

// Main is a child: it bounds its own address space first (--max-memory bytes beyond what
// it holds at its start), reads one request from in, renders it and writes the reply to
// out. Whatever a template does, it can take no more memory than that: an allocation past
// the bound ends the process.
func Main(in io.Reader, out, errOut io.Writer, args []string) int {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(errOut)
	maxMemory := fs.Int64("max-memory", 0, "address space this process may take, in bytes (0: unbounded)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *maxMemory > 0 {
		if err := boundAddressSpace(*maxMemory); err != nil {
			fmt.Fprintf(errOut, "bound the address space: %v\n", err)
			return 1
		}
		// The collector works harder well before the bound, so that a large chart that
		// fits renders rather than running out.
		debug.SetMemoryLimit(*maxMemory / 2)
	}
	quiet()
	var req request
	if err := json.NewDecoder(in).Decode(&req); err != nil {
		fmt.Fprintf(errOut, "read the request: %v\n", err)
		return 1
	}
	if err := json.NewEncoder(out).Encode(render(req)); err != nil {
		fmt.Fprintf(errOut, "write the reply: %v\n", err)
		return 1
	}
	return 0
}

// quiet makes this process the one the kernel kills first when memory runs short (it
// shares the operator's cgroup), and the one that yields the CPU to the operator (a
// template may compute for as long as its deadline allows: it must not slow every other
// team's delivery meanwhile); and it silences Helm's warnings (a coalesce warning per
// conflicting value key), whose volume would otherwise hide a fatal error's last line.
func quiet() {
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, renderNice)
	log.SetOutput(io.Discard)
	slog.SetDefault(slog.New(slog.DiscardHandler))
}

func render(req request) reply {
	ch, err := req.Chart.chart(0)
	if err != nil {
		return reply{Error: fmt.Sprintf("the request's chart: %v", err)}
	}
	r, err := helmsource.Render(ch, req.Options)
	if err != nil {
		out := reply{Error: err.Error()}
		var limit *helmsource.LimitError
		if errors.As(err, &limit) {
			out.Limit = &wireLimit{What: limit.What, Limit: limit.Limit, Max: limit.Max}
		}
		return out
	}
	return reply{Manifest: r.Manifest, Dropped: r.Dropped}
}

// boundAddressSpace lets the process map at most grow bytes more than it has mapped now.
// The Go runtime reserves a large address space at its start (1.3 to 1.6 GiB here, nearly
// all of it never touched), so the bound is counted from there: what a rendering can
// take is grow, whatever the runtime reserved before it began.
func boundAddressSpace(grow int64) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	var mapped uint64
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return fmt.Errorf("VmSize %q: %w", rest, err)
			}
			mapped = kib << 10
		}
	}
	if mapped == 0 {
		return errors.New("/proc/self/status has no VmSize")
	}
	limit := mapped + uint64(grow)
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}
