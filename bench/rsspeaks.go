package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// rssPeaks samples the summed resident set of each group of processes every so often,
// and keeps each group's largest: the most the group held at once, which adding up each
// process's own peak (VmHWM) would overstate when they peak at different moments.
type rssPeaks struct {
	cancel context.CancelFunc
	done   chan struct{}
	peaks  []float64
	err    error
}

// sampleRSS samples the groups every interval until stop.
func sampleRSS(ctx context.Context, every time.Duration, groups [][]int) *rssPeaks {
	ctx, cancel := context.WithCancel(ctx)
	p := &rssPeaks{cancel: cancel, done: make(chan struct{}), peaks: make([]float64, len(groups))}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for p.sample(groups) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// sample reads every group once, and says whether it could.
func (p *rssPeaks) sample(groups [][]int) bool {
	for i, pids := range groups {
		var sum float64
		for _, pid := range pids {
			rss, _, err := processRSSMiB(pid)
			if err != nil {
				p.err = fmt.Errorf("the resident set of process %d: %w", pid, err)
				return false
			}
			sum += rss
		}
		p.peaks[i] = max(p.peaks[i], sum)
	}
	return true
}

// stop ends the sampling and returns each group's peak, in MiB; later calls return the
// same.
func (p *rssPeaks) stop() ([]float64, error) {
	if p == nil {
		return nil, errors.New("no memory sampled")
	}
	p.cancel()
	<-p.done
	return p.peaks, p.err
}
