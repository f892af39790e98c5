// Package bytesize writes a size in bytes as a person reads it best: 512 B, 1.5 KiB,
// 256 MiB.
package bytesize

import (
	"fmt"
	"strconv"
	"strings"
)

// Format writes n bytes in binary units, with one decimal at most.
func Format(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	figure := strings.TrimSuffix(strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64), ".0")
	return fmt.Sprintf("%s %ciB", figure, "KMGTPE"[exp])
}
