package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
)

// bytesValue is a flag of a size in bytes, written as Kubernetes writes quantities
// (512Mi, 1Gi, 100M) or as a plain number, as the chart's values are.
type bytesValue struct{ p *int64 }

func (b bytesValue) String() string {
	if b.p == nil {
		return "0"
	}
	return resource.NewQuantity(*b.p, resource.BinarySI).String()
}

func (b bytesValue) Set(v string) error {
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return fmt.Errorf("want a size such as 512Mi or 1Gi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok {
		return fmt.Errorf("%s is not a whole number of bytes", v)
	}
	*b.p = n
	return nil
}
