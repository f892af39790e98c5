package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// report lists the release's files with their sizes, and the time it took.
func report(stdout io.Writer, cfg config, took time.Duration) error {
	names, err := releaseFiles(cfg.out)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	for _, name := range append(names, checksumsFile) {
		fi, err := os.Stat(filepath.Join(cfg.out, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%.1f MiB\t  %s\t\n", float64(fi.Size())/(1<<20), name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "release %s in %s, built in %s\n", cfg.version, cfg.out, took.Round(time.Second))
	return nil
}
