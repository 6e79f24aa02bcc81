package kubelet

import "testing"

func TestOSImageIsOSReleasePrettyName(t *testing.T) {
	for in, want := range map[string]string{
		"NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n": "Debian GNU/Linux 12 (bookworm)",
		"PRETTY_NAME='Alpine Linux v3.20'":                                            "Alpine Linux v3.20",
		"  PRETTY_NAME=Ubuntu 24.04\n":                                                "Ubuntu 24.04",
		"NAME=busybox\n":                                                              "Unknown",
		"PRETTY_NAME=\"\"\n":                                                          "Unknown",
		"":                                                                            "Unknown",
	} {
		if got := osImage(in); got != want {
			t.Errorf("osImage(%q) = %q, want %q", in, got, want)
		}
	}
}
