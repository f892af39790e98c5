package v1alpha1

// SyncReference names a sync another waits for: on each cluster, the waiting sync's
// VidraResource applies only once the named sync's VidraResources there are Ready at its
// current revision (spec.dependsOn).
type SyncReference struct {
	// Kind of the sync: InfrahubSync, GitSync, OCISync or HelmSync. A sync's dependsOn
	// may leave it out for one of its own kind, as Flux's dependsOn names a
	// Kustomization; a VidraResource's names it.
	// +optional
	// +kubebuilder:validation:Enum=InfrahubSync;GitSync;OCISync;HelmSync
	Kind string `json:"kind,omitempty"`
	// Name of the sync.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}
