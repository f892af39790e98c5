package infrahub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBudgetRefusesMoreThanItsWholeAtOnceAndMakesOthersWait(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	if _, err := b.reserve(ctx, 101, "artifact big"); !isLimit(err, LimitMemory) {
		t.Fatalf("reserve over the whole budget: %v, want a memory LimitError at once", err)
	}
	first, err := b.reserve(ctx, 60, "artifact a")
	if err != nil {
		t.Fatal(err)
	}
	// 60 of 100 held: 50 more must wait, until ctx ends or 10 are given back.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := b.reserve(short, 50, "artifact b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reserve beyond what is left: %v, want to wait until the context ends", err)
	}
	got := make(chan error, 1)
	go func() {
		r, err := b.reserve(ctx, 50, "artifact b")
		if err == nil {
			r.release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("reserved 50 while 60 of 100 were held: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	first.shrink(50)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if b.held() != 50 {
		t.Errorf("%d held, want the 50 the first reservation kept", b.held())
	}
	first.release()
	first.release()
	if b.held() != 0 {
		t.Errorf("%d held after every release", b.held())
	}
}

// Four syncs downloading at once from Infrahubs that declare their sizes never hold more
// than the budget together, and each keeps its content's memory held until it is done
// with it (its next download, or Close).
func TestSyncsDownloadingAtOnceStayWithinTheBudget(t *testing.T) {
	const size = 100 << 10
	body := strings.Repeat("x", size)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusOK)
		time.Sleep(20 * time.Millisecond)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	budget := NewBudget(2 * contentWeight * size) // two artifacts at a time
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				if h := budget.held(); h > peak.Load() {
					peak.Store(h)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}()
	a := Artifact{ID: "a", Checksum: Checksum([]byte(body))}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			q := NewQuota(Limits{Budget: budget}, time.Now())
			defer q.Close()
			for range 3 {
				if _, err := c.Download(context.Background(), Snapshot{Branch: "main"}, a, q); err != nil {
					errs <- fmt.Errorf("sync %d: %w", i, err)
					return
				}
				// Decoding and storing: the content's memory is still held.
				if h := budget.held(); h < contentWeight*size {
					errs <- fmt.Errorf("sync %d holds its content, but the budget shows %d held", i, h)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if p := peak.Load(); p > budget.Total() || p < contentWeight*size {
		t.Errorf("peak held %d, want at least one artifact's %d and at most the budget's %d", p, contentWeight*size, budget.Total())
	}
	if budget.held() != 0 {
		t.Errorf("%d held after every sync closed its quota", budget.held())
	}
}

// An answer that declares more than the budget can hold is refused before a byte of it
// is read; one that declares nothing is read only as far as the budget can hold.
func TestBoundedReadWeighsTheAnswerBeforeReadingIt(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(80)
	b := &boundedRead{budget: budget, limit: 1000, weight: 8, what: "artifact a", over: func(int64) error { return ErrTooLarge }}
	r := &countingReader{Reader: strings.NewReader(strings.Repeat("x", 20))}
	if _, err := b.read(ctx, r, 20); !isLimit(err, LimitMemory) || r.n != 0 {
		t.Errorf("declared 20 bytes (160 of memory, budget 80): %v after reading %d bytes", err, r.n)
	}
	r = &countingReader{Reader: strings.NewReader(strings.Repeat("x", 20))}
	if _, err := b.read(ctx, r, -1); !isLimit(err, LimitMemory) || r.n > 11 {
		t.Errorf("20 bytes of unknown size: %v after reading %d bytes, want no more than the 10 the budget holds and one", err, r.n)
	}
	if _, err := b.read(ctx, strings.NewReader("x"), 1001); !errors.Is(err, ErrTooLarge) {
		t.Errorf("declared over the limit: %v", err)
	}
	data, err := b.read(ctx, strings.NewReader("0123456789"), -1)
	if err != nil || string(data) != "0123456789" || budget.held() != 80 {
		t.Errorf("10 bytes of unknown size: %q, %v, %d held", data, err, budget.held())
	}
	b.release()
	if budget.held() != 0 {
		t.Errorf("%d held after release", budget.held())
	}
}

type countingReader struct {
	*strings.Reader
	n int
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.Reader.Read(p)
	r.n += n
	return n, err
}

func isLimit(err error, want Limit) bool {
	lim, ok := AsLimitError(err)
	return ok && lim.Limit == want
}

// An artifact whose declared size takes the sync past its bytes is refused before a byte
// of it is read, with the figure it would reach.
func TestADeclaredSizeOverTheSyncsBytesIsRefusedUnread(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(300<<10))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(make([]byte, 300<<10))
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, Options{HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	q := NewQuota(Limits{MaxBytes: 200 << 10, Budget: NewBudget(1 << 30)}, time.Now())
	_, err = c.Download(context.Background(), Snapshot{Branch: "main"}, Artifact{ID: "a"}, q)
	lim, ok := AsLimitError(err)
	if !ok || lim.Limit != LimitBytes || lim.Got != 300<<10 || !strings.Contains(err.Error(), "to 300.0 KiB, past the 200.0 KiB") {
		t.Fatalf("error %v, want the bytes bound with the declared 300 KiB", err)
	}
	if q.Downloaded() != 0 || q.limits.Budget.held() != 0 {
		t.Errorf("%d bytes counted, %d of the budget held, for content refused unread", q.Downloaded(), q.limits.Budget.held())
	}
}

// An answer of undeclared size holds memory as it arrives: while it trickles it holds a
// start, not what the whole budget can hold, and it grows to its size once it comes.
func TestAnAnswerOfUndeclaredSizeHoldsMemoryAsItArrives(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(contentWeight << 20) // 1 MiB of content
	b := &boundedRead{budget: budget, limit: 1 << 30, weight: contentWeight, what: "artifact a", over: func(int64) error { return ErrTooLarge }}
	pr, pw := io.Pipe()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := b.read(ctx, pr, -1)
		done <- result{data, err}
	}()
	if _, err := pw.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if h := budget.held(); h != contentWeight*growStart {
		t.Errorf("a trickling answer holds %d, want the start's %d, not the whole %d", h, contentWeight*growStart, budget.Total())
	}
	rest := strings.Repeat("x", 300<<10-1)
	go func() { _, _ = io.WriteString(pw, rest); _ = pw.Close() }()
	got := <-done
	if got.err != nil || len(got.data) != 300<<10 || budget.held() != contentWeight*(300<<10) {
		t.Errorf("%d bytes, %v, %d held; want 300 KiB held as such", len(got.data), got.err, budget.held())
	}
	b.release()
}
