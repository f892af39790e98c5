package infrahub

import (
	"testing"
	"time"
)

func TestAt(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		targetDate string
		want       string
		wantErr    bool
	}{
		{"", "", false},
		{"2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", false},
		{"2025-06-30T23:59:59.5+02:00", "2025-06-30T21:59:59.5Z", false},
		{"now-30s", "2026-03-01T11:59:30Z", false},
		{"now-30m", "2026-03-01T11:30:00Z", false},
		{"now-2h", "2026-03-01T10:00:00Z", false},
		{"now-1d", "2026-02-28T12:00:00Z", false},
		{"now+2h", "", true},
		{"yesterday", "", true},
	}
	for _, tt := range tests {
		got, err := At(tt.targetDate, now)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("At(%q) = %q, %v; want %q (error %v)", tt.targetDate, got, err, tt.want, tt.wantErr)
		}
	}
	for date, want := range map[string]bool{"": true, "now-2h": true, "2025-01-01T00:00:00Z": false} {
		if IsRelative(date) != want {
			t.Errorf("IsRelative(%q) = %v, want %v", date, !want, want)
		}
	}
}
