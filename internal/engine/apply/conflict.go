package apply

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conflict is a field that another field manager set to another value.
type Conflict struct {
	// Field is the field's path, such as .data.color.
	Field string
	// Manager is the field manager that holds it.
	Manager string
}

// conflictManager reads the manager out of an apply conflict cause, which the API server
// words as: conflict with "manager"[ with subresource "s"][ using v1[ at time]].
var conflictManager = regexp.MustCompile(`^conflict with ("(?:[^"\\]|\\.)*")`)

// conflictsOf lists the fields of a server-side apply conflict error.
func conflictsOf(err error) []Conflict {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []Conflict
	for _, cause := range status.Status().Details.Causes {
		if cause.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		manager := ""
		if m := conflictManager.FindStringSubmatch(cause.Message); m != nil {
			manager, _ = strconv.Unquote(m[1])
		}
		out = append(out, Conflict{Field: cause.Field, Manager: manager})
	}
	return out
}

// vidraConflicts keeps the conflicts with other Vidra owners.
func vidraConflicts(conflicts []Conflict) []Conflict {
	var out []Conflict
	for _, c := range conflicts {
		if strings.HasPrefix(c.Manager, FieldManagerPrefix) {
			out = append(out, c)
		}
	}
	return out
}
