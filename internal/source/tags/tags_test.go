package tags

import (
	"testing"

	"github.com/Masterminds/semver/v3"
)

func TestNewestTakesTheHighestStrictVersionInRange(t *testing.T) {
	names := []string{"v1.0.0", "1.2.0", "v1.10.0", "1.11.0-rc.1", "2.0.0", "latest", "20240101", "1.9"}
	for _, c := range []struct {
		constraint, want string
		ok               bool
	}{
		{">=1.0.0 <2.0.0", "v1.10.0", true},
		{"*", "2.0.0", true},
		{">=1.11.0-0 <2.0.0", "1.11.0-rc.1", true},
		{">=3", "", false},
	} {
		constraint, err := semver.NewConstraint(c.constraint)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := Newest(names, constraint); got != c.want || ok != c.ok {
			t.Errorf("Newest(%q) = %q, %v; want %q, %v", c.constraint, got, ok, c.want, c.ok)
		}
	}
	all, _ := semver.NewConstraint("*")
	if got, _ := Newest([]string{"v1.0.0", "1.0.0"}, all); got != "1.0.0" {
		t.Errorf("of v1.0.0 and 1.0.0, Newest took %q, want the one without v", got)
	}
}
