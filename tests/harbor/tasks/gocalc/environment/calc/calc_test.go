package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("Add(2, 3) != 5")
	}
}

func TestSubtract(t *testing.T) {
	if Subtract(5, 3) != 2 {
		t.Fatal("Subtract(5, 3) != 2")
	}
}

func TestMultiply(t *testing.T) {
	if Multiply(4, 3) != 12 {
		t.Fatal("Multiply(4, 3) != 12")
	}
}

func TestNegate(t *testing.T) {
	if Negate(4) != -4 {
		t.Fatal("Negate(4) != -4")
	}
}
