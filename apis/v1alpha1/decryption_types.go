package v1alpha1

// DecryptionProviderSOPS decrypts documents encrypted by SOPS.
const DecryptionProviderSOPS = "sops"

// Decryption says how the encrypted documents of a bundle are decrypted once it is
// built, before anything else is done to it: as Flux's Kustomization spec.decryption.
// What is decrypted is kept on the hub only in the content store's Secrets.
type Decryption struct {
	// Provider is sops: documents that SOPS encrypted (with age) are decrypted.
	// +kubebuilder:validation:Enum=sops
	Provider string `json:"provider"`

	// SecretRef names a Secret of the operator's namespace whose keys ending in .agekey
	// hold the age identities to decrypt with (age-keygen's files). Whoever sets it must
	// be allowed to use the Secret.
	SecretRef LocalSecretReference `json:"secretRef"`
}
