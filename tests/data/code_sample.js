// A small script for the line packer.
const limit = 10;

function square(x) {
  return x * x;
}

function cube(x) {
  return x * x * x;
}

export { square, cube, limit };
