package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// profiler records CPU profiles of the operator and of the control planes while a
// workload is delivered, so that what a figure costs can be read, not guessed.
type profiler struct {
	dir     string
	seconds int
	wg      sync.WaitGroup
}

// start records, in the background, a CPU profile of each target for p.seconds; wait
// waits for them. Profiles are written as <dir>/<workload>-<target>.pprof.
func (b *bench) startProfiles(ctx context.Context, workload string) {
	p := b.profiler
	if p == nil {
		return
	}
	targets := map[string]func() (*http.Request, *http.Client, error){
		"operator": func() (*http.Request, *http.Client, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/profile?seconds=%d", b.pprof, p.seconds), nil)
			return req, http.DefaultClient, err
		},
	}
	for name, c := range map[string]*rest.Config{"hub": b.fleet.Hub.Config, "member": b.members[0].Config} {
		targets[name] = func() (*http.Request, *http.Client, error) {
			hc, err := rest.HTTPClientFor(c)
			if err != nil {
				return nil, nil, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(c.Host, "/"), p.seconds), nil)
			return req, hc, err
		}
	}
	for name, target := range targets {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			path := filepath.Join(p.dir, workload+"-"+name+".pprof")
			if err := fetchProfile(target, path); err != nil {
				fmt.Fprintf(b.log, "  profile %s: %v\n", path, err)
				return
			}
			fmt.Fprintf(b.log, "  profile %s\n", path)
		}()
	}
}

func (b *bench) waitProfiles() {
	if b.profiler != nil {
		b.profiler.wg.Wait()
	}
}

func fetchProfile(target func() (*http.Request, *http.Client, error), path string) error {
	req, hc, err := target()
	if err != nil {
		return err
	}
	hc.Timeout = 5 * time.Minute
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// writeOwnHeap writes the bench process's own heap profile as <dir>/<workload>-bench-heap.pprof:
// the bench hosts the fleet's forwarders and the Infrahub server, and its memory is the
// machine's too.
func (b *bench) writeOwnHeap(workload string) {
	p := b.profiler
	if p == nil {
		return
	}
	path := filepath.Join(p.dir, workload+"-bench-heap.pprof")
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(b.log, "  profile %s: %v\n", path, err)
		return
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(b.log, "  profile %s: %v\n", path, err)
		return
	}
	fmt.Fprintf(b.log, "  profile %s\n", path)
}
