package v1alpha1

import "maps"

// The keys under which earlier versions wrote a bundle's annotations on its
// VidraResources and its revisions' checksum on ControllerRevisions. They are read,
// never written: a VidraResource keeps them until its sync writes it for another reason,
// so an upgrade rewrites nothing.
const (
	legacyArtifactIDAnnotation       = "vidra.infrahub.operators.com/artifact-id"
	legacyArtifactChecksumAnnotation = "vidra.infrahub.operators.com/artifact-checksum"
	legacyArtifactNameAnnotation     = "vidra.infrahub.operators.com/artifact-name"
	legacyArtifactTargetAnnotation   = "vidra.infrahub.operators.com/artifact-target"
)

// legacyBundleAnnotations maps each bundle annotation to the key it had before.
var legacyBundleAnnotations = map[string]string{
	BundleIDAnnotation:       legacyArtifactIDAnnotation,
	BundleChecksumAnnotation: legacyArtifactChecksumAnnotation,
	BundleNameAnnotation:     legacyArtifactNameAnnotation,
	BundleTargetAnnotation:   legacyArtifactTargetAnnotation,
}

// BundleAnnotation is the value of the bundle annotation key in annotations, read under
// the key it had before when it has none under its own.
func BundleAnnotation(annotations map[string]string, key string) string {
	if v, ok := annotations[key]; ok {
		return v
	}
	return annotations[legacyBundleAnnotations[key]]
}

// UpgradedBundleAnnotations is a copy of annotations with every bundle annotation under
// its own key, none under the key it had before, and the source revision that versions
// before wrote as the target of a single-bundle sync's VidraResource (sourceRevision)
// moved to BundleRevisionAnnotation. Nil when nothing is to move.
func UpgradedBundleAnnotations(annotations map[string]string, sourceRevision bool) map[string]string {
	var out map[string]string
	for key, legacy := range legacyBundleAnnotations {
		v, ok := annotations[legacy]
		if !ok {
			continue
		}
		if out == nil {
			out = maps.Clone(annotations)
		}
		delete(out, legacy)
		if key == BundleTargetAnnotation && sourceRevision {
			key = BundleRevisionAnnotation
		}
		if _, set := out[key]; !set {
			out[key] = v
		}
	}
	return out
}
