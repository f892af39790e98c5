package v1alpha1

// HealthCheck tells the health of objects of one kind with CEL expressions, as Flux's
// Kustomization spec.healthCheckExprs: for a kind whose status kstatus cannot read (no
// Ready condition, a phase of its own). Each expression sees the object's top-level
// fields (apiVersion, kind, metadata, spec, status, data) and returns a bool. An object
// whose status.observedGeneration lags its metadata.generation is in progress; else the
// first of inProgress, failed and current that is true says its state, and none, in
// progress.
type HealthCheck struct {
	// APIVersion of the objects, as group/version (v1 for the core group).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// Kind of the objects.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Current is true when the object is in the state its spec asks for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Current string `json:"current"`
	// InProgress is true while it is on its way there.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	InProgress string `json:"inProgress,omitempty"`
	// Failed is true when it cannot get there.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Failed string `json:"failed,omitempty"`
}
