package v1alpha1

// Conditions and Events are how the operator tells people what it did and why. Condition
// types and reasons are CamelCase, as the API conventions ask; a reason a condition
// carries is also the reason of the Event recorded with it. docs/conditions.md lists
// every one of them for users.

// Condition types shared by the kinds of this API. Ready, Reconciling and Stalled follow the
// kstatus conventions, so generic tools (kstatus, Flux, Argo CD health checks) read them.
const (
	// ConditionReady is True when the object's desired state is in effect.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller works towards the desired state.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change of the object or its inputs.
	ConditionStalled = "Stalled"
)

// Condition types of a VidraResource beside Ready, Reconciling and Stalled.
const (
	// ConditionConflict is True on every VidraResource that declares a field of a shared
	// object differently from another: the one whose value is in effect and the one
	// refused.
	ConditionConflict = "Conflict"
	// ConditionPinned is True while a rollback holds the VidraResource's content.
	ConditionPinned = "Pinned"
	// ConditionVMRollout is True when every VirtualMachine of the VidraResource runs its
	// current spec, False while a rollout progresses, waits for a person or is paused.
	ConditionVMRollout = "VMRollout"
)

// ConditionRolledOut on an InfrahubSync with a progressive rollout is True once the
// newest revision reached every cluster healthy.
const ConditionRolledOut = "RolledOut"

// ConditionKubeconfigCurrent on a VidraCluster is True when the engaged kubeconfig is the
// one the Secret holds now, False while a changed kubeconfig could not replace it.
const ConditionKubeconfigCurrent = "KubeconfigCurrent"

// Reasons shared by the kinds.
const (
	// ReasonSucceeded: the desired state is in effect.
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing: the controller is working towards it.
	ReasonProgressing = "Progressing"
	// ReasonSuspended: spec.suspend holds everything as it is.
	ReasonSuspended = "Suspended"
)

// Condition reasons of a VidraResource (Ready, Reconciling, Stalled, Conflict, Pinned).
const (
	// ReasonInvalidManifest: a document of the bundle does not decode; nothing is applied.
	ReasonInvalidManifest = "InvalidManifest"
	// ReasonClusterNotFound: the destination names no engaged cluster (yet).
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonApplyFailed: objects could not be applied; the message names them.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonPruneFailed: objects that left the bundle could not be released.
	ReasonPruneFailed = "PruneFailed"
	// ReasonConflict: another VidraResource declares fields of a shared object
	// differently, or an object exists that Vidra does not manage.
	ReasonConflict = "Conflict"
	// ReasonDeleting: the VidraResource is deleted and waits for its objects to be
	// released.
	ReasonDeleting = "Deleting"
	// ReasonHealthCheckFailed: applied objects failed by kstatus or by their
	// healthCheckExprs, or stayed in progress past spec.timeout.
	ReasonHealthCheckFailed = "HealthCheckFailed"
	// ReasonHealthCheckInvalid: an expression of spec.healthCheckExprs does not compile.
	ReasonHealthCheckInvalid = "HealthCheckInvalid"
	// ReasonContentUnavailable: spec.content names content that is missing from the
	// content store, or that fails its checks; nothing is applied.
	ReasonContentUnavailable = "ContentUnavailable"
	// ReasonContentRefused: spec.content names stored content that is not the
	// VidraResource's to deliver; nothing is applied.
	ReasonContentRefused = "ContentRefused"
	// ReasonInventoryTooLarge: the bundle names more objects than a VidraResource can
	// record within the hub's object size limit; nothing is applied.
	ReasonInventoryTooLarge = "InventoryTooLarge"
	// ReasonPolicyDenied: the bundle breaks its cluster's delivery policy; nothing of it
	// is applied or pruned.
	ReasonPolicyDenied = "PolicyDenied"
	// ReasonAdmissionPoliciesMissing: the hub's admission policies that record and check
	// who asked are not all in force, and the bundle needs them (it names its cluster by
	// server URL, or does not say who asked); nothing of it is applied or pruned.
	ReasonAdmissionPoliciesMissing = "AdmissionPoliciesMissing"
	// ReasonDryRun: spec.dryRun previews the bundle in status.preview and applies nothing.
	ReasonDryRun = "DryRun"
	// ReasonRolledBack: a rollback pinned the VidraResource's content (condition Pinned);
	// on an InfrahubSync, the Event of a wave sent back to the previous revision.
	ReasonRolledBack = "RolledBack"
)

// Event reasons of a VidraResource beside its condition reasons and the outcomes of the
// apply (Created, Configured, Repaired, Deleted, Released, Failed, NotManaged).
const (
	// EventHistoryFailed: the revision could not be recorded; the delivery goes on, its
	// inventory recorded in status.
	EventHistoryFailed = "HistoryFailed"
)

// Condition reasons of an InfrahubSync.
const (
	// ReasonSourceInvalid: the source cannot be used as written (a refused URL, a missing
	// or unreadable credentials or CA Secret); fixing the InfrahubSync or its Secret helps.
	ReasonSourceInvalid = "SourceInvalid"
	// ReasonCredentialsRefused: the sync names a Secret it may not use: its requester
	// lacks the verb use on it, or the Secret does not list the source's URL among those
	// it may be sent to; the message names the Secret and what is missing.
	ReasonCredentialsRefused = "CredentialsRefused"
	// ReasonAuthenticationFailed: Infrahub refused the credentials.
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonListFailed: the artifacts could not be listed; nothing was changed.
	ReasonListFailed = "ListFailed"
	// ReasonBundleFailed: some bundles could not be delivered (an artifact not Ready in
	// Infrahub, a checksum mismatch, content that is not a manifest); their
	// VidraResources are kept as they were.
	ReasonBundleFailed = "BundleFailed"
	// ReasonNoArtifacts: Infrahub lists no artifact of that name; nothing was removed.
	ReasonNoArtifacts = "NoArtifacts"
	// ReasonVidraResourceFailed: a VidraResource could not be written.
	ReasonVidraResourceFailed = "VidraResourceFailed"

	// ReasonDependencyNotReady: a sync a VidraResource depends on (spec.dependsOn) is not
	// Ready on its cluster yet (Flux's reason of the same name); it applies once it is.
	ReasonDependencyNotReady = "DependencyNotReady"
	// ReasonDependencyCycle: the syncs' spec.dependsOn make a cycle, which nothing in it
	// can ever leave.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonRolloutFailed: the progressive rollout cannot go on as the sync is written;
	// as an Event, a wave or the revision was not healthy within healthTimeout.
	ReasonRolloutFailed = "RolloutFailed"
	// ReasonLimitExceeded: the sync went over a bound the operator sets on reading
	// Infrahub (artifacts listed, bytes downloaded, memory, time); the message names the
	// bound and the flag that raises it. Nothing delivered was removed.
	ReasonLimitExceeded = "LimitExceeded"
	// ReasonFetchFailed: a GitSync's or OCISync's source could not be reached or read;
	// retried with backoff, and what was delivered stays.
	ReasonFetchFailed = "FetchFailed"
	// ReasonRefNotFound: the branch, tag, semver range, commit or digest names nothing at
	// the source; looked at again at the interval.
	ReasonRefNotFound = "RefNotFound"
	// ReasonBuildFailed: the revision's path holds no bundle: missing, empty, a Kustomize
	// error, a remote base, an artifact that is not tar+gzip, or not manifests.
	ReasonBuildFailed = "BuildFailed"
	// ReasonDecryptionFailed: spec.decryption could not decrypt a document of the
	// revision (no identity of its Secret opens it, or it was changed after it was
	// encrypted), or the Secret holds no age identity; what was delivered stays.
	ReasonDecryptionFailed = "DecryptionFailed"
)

// Event reasons of a sync beside its condition reasons.
const (
	// EventBundleAdded: a new bundle was delivered as VidraResources.
	EventBundleAdded = "BundleAdded"
	// EventBundleUpdated: a bundle's content changed and its VidraResources with it.
	EventBundleUpdated = "BundleUpdated"
	// EventArtifactRemoved: an InfrahubSync's artifact left the listing and its
	// VidraResources went.
	EventArtifactRemoved = "ArtifactRemoved"
	// EventRolloutStarted: a new revision starts its progressive rollout.
	EventRolloutStarted = "RolloutStarted"
	// EventRolloutResumed: a person resumed a failed or rolled-back rollout.
	EventRolloutResumed = "RolloutResumed"
	// EventWaveStarted and EventWaveCompleted: a wave began, or all its clusters are
	// healthy on the revision.
	EventWaveStarted   = "WaveStarted"
	EventWaveCompleted = "WaveCompleted"
	// EventRolloutCompleted: the revision reached every cluster, healthy.
	EventRolloutCompleted = "RolloutCompleted"
	// EventNameTaken, on a VidraResource the sync did not make: it holds the name the
	// sync gives one of its bundles, which is not delivered there while it does.
	EventNameTaken = "NameTaken"
	// EventRevisionReady: the sync's revision is Ready on every cluster it reaches.
	EventRevisionReady = "RevisionReady"
	// EventClusterFailed: the sync's bundle failed on a cluster (the Event names it and
	// why); recorded when it starts failing there, or fails for another reason.
	EventClusterFailed = "ClusterFailed"
	// EventPreviewReady: a ref's commit was previewed on every cluster the sync
	// reaches, and none refuses it; the note counts what it would change.
	EventPreviewReady = "PreviewReady"
	// EventPreviewFailed: a ref's commit could not be built, a cluster refuses it, or the
	// refs to preview could not be listed.
	EventPreviewFailed = "PreviewFailed"
)

// Condition reasons of an Alert and an AlertProvider (Ready).
const (
	// ReasonProviderNotFound: the Alert's providerRef names no AlertProvider.
	ReasonProviderNotFound = "ProviderNotFound"
	// ReasonProviderNotReady: the Alert's AlertProvider is not Ready.
	ReasonProviderNotReady = "ProviderNotReady"
	// ReasonInvalidAlert: an expression of inclusionList or exclusionList does not
	// compile.
	ReasonInvalidAlert = "InvalidAlert"
	// ReasonInvalidProvider: the AlertProvider cannot be used as written: an address
	// that is not a URL, a type that needs a token and a Secret without one.
	ReasonInvalidProvider = "InvalidProvider"
)

// EventSendFailed is recorded on an AlertProvider when an event could not be sent to its
// receiver within the retries, and was dropped.
const EventSendFailed = "SendFailed"

// The VM rollout's reasons on a VidraResource (condition VMRollout).
const (
	// ReasonVMRolloutPaused: a restarted VM did not come back; nothing more is restarted.
	ReasonVMRolloutPaused = "Paused"
	// ReasonVMRestartRequired: VMs need a restart that the Manual strategy leaves to a person.
	ReasonVMRestartRequired = "RestartRequired"
	// ReasonVMRestartFailed: a restart could not be asked for.
	ReasonVMRestartFailed = "RestartFailed"
)

// Event reasons of the VM rollout, each about one VM (the Event's related object).
const (
	// EventVMRestarting: Vidra asked KubeVirt to restart the VM.
	EventVMRestarting = "VMRestarting"
	// EventVMRestarted: the VM is back, Ready, with its new spec.
	EventVMRestarted = "VMRestarted"
	// EventVMRestartTimedOut: the VM did not come back within readyTimeout; the rollout
	// pauses.
	EventVMRestartTimedOut = "VMRestartTimedOut"
	// EventVMRestartFailed: the restart could not be asked for.
	EventVMRestartFailed = "VMRestartFailed"
)

// Condition reasons of a VidraCluster (Ready, KubeconfigCurrent), also the reasons of the
// Events on its enrollment Secret.
const (
	// ReasonEngaged: the cluster is engaged and answers its probes.
	ReasonEngaged = "Engaged"
	// ReasonUnreachable: the cluster stopped answering, or could not be reached when
	// enrolled.
	ReasonUnreachable = "Unreachable"
	// ReasonCredentialsExpired: the token the kubeconfig holds expired: re-enroll.
	ReasonCredentialsExpired = "CredentialsExpired"
	// ReasonRotated: the Secret's kubeconfig is the one engaged.
	ReasonRotated = "Rotated"
	// ReasonRotationFailed: a changed kubeconfig did not work; the previous one stays.
	ReasonRotationFailed = "RotationFailed"
	// ReasonAgentPending: a pull cluster whose agent has not reported yet.
	ReasonAgentPending = "AgentPending"
	// ReasonAgentReporting: a pull cluster's agent reports on time.
	ReasonAgentReporting = "AgentReporting"
	// ReasonAgentSilent: a pull cluster's agent stopped reporting for longer than the
	// operator's --agent-timeout.
	ReasonAgentSilent = "AgentSilent"
	// ReasonAgentTokenExpired: the token a pull cluster's agent last reported expired,
	// so the hub refuses it: the agent cannot renew it any more, re-enroll.
	ReasonAgentTokenExpired = "AgentTokenExpired"
	// ReasonAgentIdentityMissing: the agent's ServiceAccount on the hub is gone, so the
	// hub refuses the agent: re-enroll.
	ReasonAgentIdentityMissing = "AgentIdentityMissing"
	// ReasonPullCredentials: a pull cluster's enrollment Secret holds a kubeconfig; a pull
	// cluster's Secret must hold no credential.
	ReasonPullCredentials = "PullSecretHoldsCredentials"
	// ReasonInvalidClusterName: the enrollment label names no valid cluster.
	ReasonInvalidClusterName = "InvalidClusterName"
	// ReasonMissingKubeconfig: the Secret holds no kubeconfig key.
	ReasonMissingKubeconfig = "MissingKubeconfig"
	// ReasonDuplicateClusterName and ReasonDuplicateServer: an earlier Secret enrolls the
	// same cluster name, or the same API server.
	ReasonDuplicateClusterName = "DuplicateClusterName"
	ReasonDuplicateServer      = "DuplicateServer"
	// ReasonProvisioning: the cluster's inventory object (a Cluster API Cluster) is not
	// provisioned yet; it is enrolled once it is. Not an error.
	ReasonProvisioning = "Provisioning"
	// ReasonControlPlaneUnhealthy: the cluster's inventory (a ClusterProfile's
	// ControlPlaneHealthy condition) says its control plane is not healthy; it is
	// engaged again once it is.
	ReasonControlPlaneUnhealthy = "ControlPlaneUnhealthy"
	// ReasonInventoryRefused: the inventory's credentials for the cluster were refused
	// (the kubeconfig policy) or could not create the scoped identity on it.
	ReasonInventoryRefused = "InventoryRefused"
)

// Event reasons of the identity enroll created, on the enrollment Secret.
const (
	// EventCredentialsRenewed: the token was renewed through the member's TokenRequest API.
	EventCredentialsRenewed = "CredentialsRenewed"
	// EventCredentialsRenewalFailed: the token could not be renewed; it expires as shown.
	EventCredentialsRenewalFailed = "CredentialsRenewalFailed"
)

// Reasons a kubeconfig is refused, on a Rejected VidraCluster: it does not parse, names
// no usable context or server, or uses what the operator does not allow (exec and
// auth-provider plugins, files of the operator's, TLS without verification).
const (
	ReasonInvalidKubeconfig      = "InvalidKubeconfig"
	ReasonNoCurrentContext       = "NoCurrentContext"
	ReasonUnknownContext         = "UnknownContext"
	ReasonInvalidServer          = "InvalidServer"
	ReasonExecPluginNotAllowed   = "ExecPluginNotAllowed"
	ReasonAuthProviderNotAllowed = "AuthProviderNotAllowed"
	ReasonFileReference          = "FileReference"
	ReasonInsecureTLSNotAllowed  = "InsecureTLSNotAllowed"
)
