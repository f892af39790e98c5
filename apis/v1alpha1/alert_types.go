package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AlertProvider types: where an Alert sends what it selects, and how.
const (
	// AlertProviderGeneric posts each event as JSON (Flux's event format) to address.
	AlertProviderGeneric = "generic"
	// AlertProviderGenericHMAC does too, signed: X-Signature: sha256=<hex HMAC-SHA256
	// of the body, keyed with the Secret's token>.
	AlertProviderGenericHMAC = "generic-hmac"
	// AlertProviderSlack posts to a Slack incoming webhook.
	AlertProviderSlack = "slack"
	// AlertProviderMSTeams posts an Adaptive Card to a Microsoft Teams workflow webhook.
	AlertProviderMSTeams = "msteams"
	// AlertProviderGitHub, AlertProviderGitLab and AlertProviderGitea write commit
	// statuses on the repository that address names.
	AlertProviderGitHub = "github"
	AlertProviderGitLab = "gitlab"
	AlertProviderGitea  = "gitea"
)

// Severities of the events an Alert sends.
const (
	// EventSeverityInfo selects every event.
	EventSeverityInfo = "info"
	// EventSeverityError selects Warning events alone.
	EventSeverityError = "error"
)

// AlertProviderSpec says where alerts go.
// +kubebuilder:validation:XValidation:rule="has(self.address) || has(self.secretRef)",message="set address, or a secretRef whose Secret holds the address"
type AlertProviderSpec struct {
	// Type of the receiver.
	// +kubebuilder:validation:Enum=generic;generic-hmac;slack;msteams;github;gitlab;gitea
	Type string `json:"type"`

	// Address is the receiver's URL: a webhook's, or a repository's web URL for
	// github, gitlab and gitea. The Secret's address key, when set, takes its place
	// (a Slack or Teams webhook URL is itself a credential).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="address must be an https:// or http:// URL"
	Address string `json:"address,omitempty"`

	// Channel overrides a Slack webhook's channel.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Channel string `json:"channel,omitempty"`

	// Username overrides a Slack webhook's user name.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Username string `json:"username,omitempty"`

	// SecretRef names a Secret in the operator's namespace holding token (an HMAC key,
	// or a Git host's API token) and optionally address. Whoever writes the provider
	// needs the verb use on it, and the Secret's allowed-urls annotation must cover the
	// address, as for every credential Vidra sends.
	// +optional
	SecretRef *LocalSecretReference `json:"secretRef,omitempty"`

	// Timeout bounds each request to the receiver.
	// +optional
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+(\\\\.[0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1s') && duration(self) <= duration('5m')",message="timeout must be a duration from 1s to 5m, such as 15s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Suspend sends nothing through this provider.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// AlertStatus is what the operator found of an Alert or an AlertProvider.
type AlertStatus struct {
	// ObservedGeneration is the generation of the spec the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready is True when the object can be used as written.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AlertProvider is a receiver of alerts: a webhook, a chat, or a Git host's commit
// statuses.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=vidra
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AlertProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AlertProviderSpec `json:"spec,omitempty"`
	Status AlertStatus       `json:"status,omitempty"`
}

// AlertProviderList is a list of AlertProviders.
// +kubebuilder:object:root=true
type AlertProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AlertProvider `json:"items"`
}

// ProviderReference names an AlertProvider.
type ProviderReference struct {
	// Name of the AlertProvider.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EventSource selects the objects whose events an Alert sends: one by name, or every
// one of a kind ("*" or no name), narrowed by labels.
type EventSource struct {
	// Kind of the objects.
	// +kubebuilder:validation:Enum=InfrahubSync;GitSync;OCISync;HelmSync;VidraResource
	Kind string `json:"kind"`
	// Name of the object; "*" or none selects every one of the kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// MatchLabels selects the objects carrying all these labels.
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// AlertSpec says which events go to which provider.
type AlertSpec struct {
	// ProviderRef names the AlertProvider.
	ProviderRef ProviderReference `json:"providerRef"`

	// EventSources select the objects whose events are sent.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	EventSources []EventSource `json:"eventSources"`

	// EventSeverity is the least severity sent: info sends every event, error only
	// Warning events (failures).
	// +optional
	// +kubebuilder:default=info
	// +kubebuilder:validation:Enum=info;error
	EventSeverity string `json:"eventSeverity,omitempty"`

	// InclusionList sends only events whose message matches one of these regular
	// expressions (RE2).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	InclusionList []string `json:"inclusionList,omitempty"`

	// ExclusionList sends no event whose message matches one of these; it wins over
	// InclusionList.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	ExclusionList []string `json:"exclusionList,omitempty"`

	// Summary is added to every event sent, as its metadata's summary.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Summary string `json:"summary,omitempty"`

	// Suspend sends nothing for this Alert.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// Alert sends the events of the syncs and VidraResources it selects to an
// AlertProvider.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=vidra
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.providerRef.name`
// +kubebuilder:printcolumn:name="Severity",type=string,JSONPath=`.spec.eventSeverity`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Alert struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   AlertSpec   `json:"spec,omitempty"`
	Status AlertStatus `json:"status,omitempty"`
}

// AlertList is a list of Alerts.
// +kubebuilder:object:root=true
type AlertList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Alert `json:"items"`
}

// StatusConditions are the AlertProvider's conditions, for the conditions helpers.
func (p *AlertProvider) StatusConditions() *[]metav1.Condition { return &p.Status.Conditions }

// StatusConditions are the Alert's conditions, for the conditions helpers.
func (a *Alert) StatusConditions() *[]metav1.Condition { return &a.Status.Conditions }
