package main

import "fmt"

// webserverArtifact is the demo's rendered artifact, as an Infrahub artifact definition
// would render it: a Namespace shared with other bundles, a web Deployment and its
// Service, and a VirtualMachine whose memory a later change may raise.
func webserverArtifact(vmMemory string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: registry.example/nginx:1.27
        ports: [{containerPort: 80}]
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 80}]
---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: edge-router
spec:
  runStrategy: Always
  template:
    metadata:
      labels: {app: edge-router}
    spec:
      domain:
        cpu: {sockets: 1}
        devices: {}
        resources:
          requests: {memory: %s}
`, vmMemory)
}
