// Makes the next opt_<name>.glsl an update() on floats (p, slot in floats).
#undef T
#undef LD
#undef ST
#undef LD0
#undef ST0
#undef LD1
#undef ST1
#undef LD2
#undef ST2
#define T float
#define LD(i) arena1[i]
#define ST(i, x) arena1[i] = (x)
// The slots' windows are vec4 arrays: a float is one lane of one (their bases
// are multiples of 4 floats).
#define LD0(i) slot0[(i) / 4][(i) % 4]
#define ST0(i, x) slot0[(i) / 4][(i) % 4] = (x)
#define LD1(i) slot1[(i) / 4][(i) % 4]
#define ST1(i, x) slot1[(i) / 4][(i) % 4] = (x)
#define LD2(i) slot2[(i) / 4][(i) % 4]
#define ST2(i, x) slot2[(i) / 4][(i) % 4] = (x)
