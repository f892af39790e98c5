package history

import (
	"cmp"
	"fmt"
	"strings"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// SyncSource says where the content of a VidraResource that a sync made comes from, as its
// revision records it: "InfrahubSync web: artifact <id>, checksum <sum>", or, for a sync of
// a Git or OCI source, which delivers one bundle named by its source's revision,
// "GitSync web: bundle main@sha1:<commit>, checksum <sum>". Empty when no sync made it.
func SyncSource(vr *vidrav1alpha1.VidraResource) string {
	kind, name := vidrav1alpha1.SyncOf(vr.Labels)
	if name == "" {
		return ""
	}
	checksum := vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleChecksumAnnotation)
	if kind.Label == vidrav1alpha1.InfrahubSyncLabel {
		return fmt.Sprintf("%s %s: artifact %s, checksum %s", kind.Kind, name, vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleIDAnnotation), checksum)
	}
	// Earlier versions wrote the source's revision as the bundle's target.
	revision := cmp.Or(vr.Annotations[vidrav1alpha1.BundleRevisionAnnotation], vidrav1alpha1.BundleAnnotation(vr.Annotations, vidrav1alpha1.BundleTargetAnnotation))
	return fmt.Sprintf("%s %s: %s%s, checksum %s", kind.Kind, name, bundlePrefix, revision, checksum)
}

// bundlePrefix introduces the source revision in what SyncSource writes.
const bundlePrefix = "bundle "

// SourceRevision is the revision of a Git or OCI source that a revision's source (as
// SyncSource writes it) names, such as "main@sha1:<commit>"; empty for any other source.
func SourceRevision(source string) string {
	_, rest, ok := strings.Cut(source, ": "+bundlePrefix)
	if !ok {
		return ""
	}
	revision, _, _ := strings.Cut(rest, ", checksum ")
	return revision
}
