package vidraresource

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
	"github.com/vidra-operator/vidra/internal/apply"
	"github.com/vidra-operator/vidra/internal/intern"
)

// CompactCached is the hub cache's transform of VidraResources. Besides what
// apply.TrimCached drops, the strings a fleet's VidraResources repeat, one per bundle and
// cluster, take the copy the table holds: label values, owners, destinations, condition
// types, states and reasons, and the kinds, API versions, names, namespaces and states
// of their inventories. Each string a decoded object holds is an allocation of its own,
// and ten thousand VidraResources of one fleet hold a hundred thousand inventory entries
// that differ in a few strings.
func CompactCached(table *intern.Table) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		obj, err := apply.TrimCached(obj)
		vr, ok := obj.(*vidrav1alpha1.VidraResource)
		if err != nil || !ok {
			return obj, err
		}
		s := table.String
		for k, v := range vr.Labels { // in place: a map built anew would cost more than it saves
			vr.Labels[k] = s(v)
		}
		for i := range vr.OwnerReferences {
			o := &vr.OwnerReferences[i]
			o.APIVersion, o.Kind, o.Name = s(o.APIVersion), s(o.Kind), s(o.Name)
		}
		d := &vr.Spec.Destination
		d.Server, d.Cluster, d.Namespace = s(d.Server), s(d.Cluster), s(d.Namespace)
		st := &vr.Status
		st.Cluster, st.DeployState = s(st.Cluster), vidrav1alpha1.State(s(string(st.DeployState)))
		for i := range st.Conditions {
			c := &st.Conditions[i]
			c.Type, c.Reason, c.Status = s(c.Type), s(c.Reason), metav1.ConditionStatus(s(string(c.Status)))
		}
		for i := range st.ManagedResources {
			m := &st.ManagedResources[i]
			m.Kind, m.APIVersion, m.Name, m.Namespace, m.Status = s(m.Kind), s(m.APIVersion), s(m.Name), s(m.Namespace), s(m.Status)
		}
		return vr, nil
	}
}
