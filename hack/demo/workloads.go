package main

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vidrav1alpha1 "github.com/vidra-operator/vidra/apis/v1alpha1"
)

// runNodes stands in for the nodes the sandbox clusters do not have: every Deployment
// Vidra manages is reported as rolled out and available, as a kubelet and the
// deployment controller would, so health checks see what they would on a real cluster.
func runNodes(ctx context.Context, c client.Client) {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	for {
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list, client.MatchingLabels{vidrav1alpha1.ManagedByLabel: vidrav1alpha1.ManagedByValue}); err == nil {
			for i := range list.Items {
				markAvailable(ctx, c, &list.Items[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func markAvailable(ctx context.Context, c client.Client, d *appsv1.Deployment) {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == replicas && d.Status.UpdatedReplicas == replicas {
		return
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	_ = c.Status().Update(ctx, d) // a conflict is retried on the next tick
}
