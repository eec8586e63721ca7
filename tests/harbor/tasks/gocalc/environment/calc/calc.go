// Package calc is a calculator with two bugs.
package calc

func Add(a, b int) int { return a + b }

func Subtract(a, b int) int { return a + b }

func Multiply(a, b int) int { return a + b }

func Negate(a int) int { return -a }
