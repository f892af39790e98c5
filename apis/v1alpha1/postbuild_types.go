package v1alpha1

// PostBuild says what is done to a bundle once it is built from its source, before it
// goes to each cluster: variables substituted, as Flux's Kustomization spec.postBuild.
type PostBuild struct {
	// Substitute holds variables, by name, put in for ${name} in every object of the
	// bundle. They take precedence over those of substituteFrom.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[_a-zA-Z][_a-zA-Z0-9]*$'))",message="a variable's name is letters, digits and underscores, and does not begin with a digit"
	Substitute map[string]string `json:"substitute,omitempty"`

	// SubstituteFrom names ConfigMaps and Secrets of the operator's namespace whose data
	// are variables, read in order (a later one wins).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	SubstituteFrom []SubstituteReference `json:"substituteFrom,omitempty"`
}

// SubstituteReference names a ConfigMap or a Secret of the operator's namespace whose
// keys and values are variables.
type SubstituteReference struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// Name of the ConfigMap or Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Optional: a ConfigMap or Secret that does not exist gives no variables, instead of
	// stopping the sync.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// SubstituteAnnotation set to SubstituteDisabled on an object of a bundle leaves its
// ${…} as they are. Flux's own (FluxSubstituteAnnotation) is honoured too, so that
// manifests written for Flux keep their meaning.
const (
	SubstituteAnnotation     = "vidra.infrahub.operators.com/substitute"
	FluxSubstituteAnnotation = "kustomize.toolkit.fluxcd.io/substitute"
	SubstituteDisabled       = "disabled"
)
