package tensor

import "errors"

var (
	// ErrShape: a shape is unknown, negative or does not match the values.
	ErrShape = errors.New("tensor: bad shape")
	// ErrDType: the dtype is not one the stand-in computes on.
	ErrDType = errors.New("tensor: unsupported dtype")
	// ErrContent: tensor_content or a value list does not fit the shape.
	ErrContent = errors.New("tensor: bad content")
	// ErrJSON: a REST value is not a (rectangular) nested array of numbers.
	ErrJSON = errors.New("tensor: bad JSON value")
)
