package admissionguard

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	got, err := Parse(" validating/vidra-deliver, Mutating/vidra-deliver-requester,,")
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{{Kind: Validating, Name: "vidra-deliver"}, {Kind: Mutating, Name: "vidra-deliver-requester"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse = %v, want %v", got, want)
	}
	if got, err := Parse(""); err != nil || len(got) != 0 {
		t.Errorf("Parse(\"\") = %v, %v; want none", got, err)
	}
	for _, bad := range []string{"vidra-deliver", "validating/", "webhook/vidra"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}
