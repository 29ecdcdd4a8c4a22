package order

import "testing"

func TestNo_roundTripsAndRejectsGarbage(t *testing.T) {
	no := NewNo(42)
	if id, err := ParseNo(no); err != nil || id != 42 {
		t.Fatalf("ParseNo(%q) = %d, %v", no, id, err)
	}
	if NewNo(42) == no {
		t.Fatal("two order numbers alike")
	}
	for _, bad := range []string{"", "42", "42-", "x-0CF3YH0AB7J8Q2RS", "0-0CF3YH0AB7J8Q2RS", "-1-0CF3YH0AB7J8Q2RS",
		"042-0CF3YH0AB7J8Q2RS", "42-0CF3YH0AB7J8Q2R", "42-0CF3YH0AB7J8Q2Ru", "42-0CF3YH0AB7J8Q2R!"} {
		if _, err := ParseNo(bad); err == nil {
			t.Errorf("ParseNo(%q) accepted", bad)
		}
	}
}
