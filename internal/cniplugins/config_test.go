package cniplugins

import (
	"strings"
	"testing"
)

func TestConfigurationsRefuseWhatIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name, conf, want string
		load             func([]byte) error
	}{
		{"bridge unknown field", `{"cniVersion":"1.0.0","name":"n","type":"bridge","vlan":3,"ipam":{"type":"host-local"}}`, `field "vlan"`,
			func(b []byte) error { _, err := loadBridge(b); return err }},
		{"bridge without ipam", `{"cniVersion":"1.0.0","name":"n","type":"bridge"}`, "ipam.type",
			func(b []byte) error { _, err := loadBridge(b); return err }},
		{"firewall nftables", `{"cniVersion":"1.0.0","name":"n","type":"firewall","backend":"firewalld"}`, `backend "firewalld"`,
			func(b []byte) error { _, err := loadFirewall(b); return err }},
		{"portmap protocol", `{"cniVersion":"1.0.0","name":"n","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080,"protocol":"icmp"}]}}`,
			"portMappings[0].protocol", func(b []byte) error { _, err := loadPortmap(b); return err }},
		{"portmap loopback", `{"cniVersion":"1.0.0","name":"n","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":80,"containerPort":8080,"hostIP":"127.0.0.1"}]}}`,
			"portMappings[0].hostIP", func(b []byte) error { _, err := loadPortmap(b); return err }},
		{"portmap port", `{"cniVersion":"1.0.0","name":"n","type":"portmap","runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":8080}]}}`,
			"portMappings[0]", func(b []byte) error { _, err := loadPortmap(b); return err }},
	} {
		err := tc.load([]byte(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}

func TestPortmapRulesDNATEachMappingToThePod(t *testing.T) {
	c, err := loadPortmap([]byte(`{"cniVersion":"1.0.0","name":"skiff","type":"portmap","runtimeConfig":{"portMappings":[
		{"hostPort":8080,"containerPort":80,"protocol":"TCP"},{"hostPort":5353,"containerPort":53,"protocol":"udp","hostIP":"192.0.2.1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rules := dnatRules(c, "ctr1", "10.88.0.5")
	if len(rules) != 2 {
		t.Fatalf("rules %v, want 2", rules)
	}
	got0, got1 := strings.Join(rules[0], " "), strings.Join(rules[1], " ")
	if !strings.HasPrefix(got0, "-p tcp --dport 8080 ") || !strings.HasSuffix(got0, "-j DNAT --to-destination 10.88.0.5:80") {
		t.Errorf("tcp rule %q", got0)
	}
	if !strings.HasPrefix(got1, "-p udp --dport 5353 -d 192.0.2.1 ") || !strings.HasSuffix(got1, "--to-destination 10.88.0.5:53") {
		t.Errorf("udp rule %q", got1)
	}
	if !strings.Contains(got0, "ctr1") {
		t.Errorf("rule %q is not tagged with its container", got0)
	}
}
