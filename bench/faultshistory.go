package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// history is what happened in the faults phase, in order: every fault injected and
// undone, every revision pushed, every violation found. It is written to a file as it
// happens, and a violation prints it all, with the seed that replays the schedule.
type history struct {
	mu    sync.Mutex
	start time.Time
	file  *os.File
	lines []string
}

func newHistory(path string) (*history, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &history{start: time.Now(), file: f}, nil
}

// record notes one event, with the seconds since the phase began.
func (h *history) record(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := fmt.Sprintf("%8.2fs %s", time.Since(h.start).Seconds(), fmt.Sprintf(format, args...))
	h.lines = append(h.lines, line)
	_, _ = fmt.Fprintln(h.file, line)
}

// print writes the whole history to w.
func (h *history) print(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintln(w, strings.Join(h.lines, "\n"))
}

func (h *history) path() string { return h.file.Name() }

func (h *history) close() error { return h.file.Close() }
