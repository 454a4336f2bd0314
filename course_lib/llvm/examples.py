"""Small LLVM IR programs the labs and tests read: the same loop at -O0 (allocas) and in SSA.

``SUM_ALLOCA`` is what ``clang -O0`` writes for ``long sum(long *a, long n)``: every variable is
a stack slot. ``SUM_PHI`` is the same function after ``mem2reg`` (typed pointers, so the
system's older ``llc`` reads it too). ``NESTED_PHI`` has a loop inside a loop, for the loop
analysis. ``VADD_PHI`` (a loop) and ``ADD4`` (four adjacent adds) are for the
loop and SLP vectorisers.
"""

from __future__ import annotations

SUM_ALLOCA = """\
define i64 @sum(ptr %a, i64 %n) {
entry:
  %i = alloca i64
  %s = alloca i64
  store i64 0, ptr %i
  store i64 0, ptr %s
  br label %cond
cond:
  %iv = load i64, ptr %i
  %c = icmp slt i64 %iv, %n
  br i1 %c, label %body, label %exit
body:
  %p = getelementptr i64, ptr %a, i64 %iv
  %x = load i64, ptr %p
  %sv = load i64, ptr %s
  %s2 = add i64 %sv, %x
  store i64 %s2, ptr %s
  %i2 = add i64 %iv, 1
  store i64 %i2, ptr %i
  br label %cond
exit:
  %r = load i64, ptr %s
  ret i64 %r
}
"""

SUM_PHI = """\
define i64 @sum(i64* %a, i64 %n) {
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i2, %body ]
  %s = phi i64 [ 0, %entry ], [ %s2, %body ]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %body, label %exit
body:
  %p = getelementptr i64, i64* %a, i64 %i
  %x = load i64, i64* %p
  %s2 = add i64 %s, %x
  %i2 = add i64 %i, 1
  br label %cond
exit:
  ret i64 %s
}
"""

# sum over i < n, j < i of (i * j): two nested loops, headers outer and inner
NESTED_PHI = """\
define i64 @tri(i64 %n) {
entry:
  br label %outer
outer:
  %i = phi i64 [ 0, %entry ], [ %i2, %outer.latch ]
  %s = phi i64 [ 0, %entry ], [ %s.out, %outer.latch ]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %inner.pre, label %exit
inner.pre:
  br label %inner
inner:
  %j = phi i64 [ 0, %inner.pre ], [ %j2, %inner.body ]
  %t = phi i64 [ %s, %inner.pre ], [ %t2, %inner.body ]
  %cj = icmp slt i64 %j, %i
  br i1 %cj, label %inner.body, label %outer.latch
inner.body:
  %ij = mul i64 %i, %j
  %t2 = add i64 %t, %ij
  %j2 = add i64 %j, 1
  br label %inner
outer.latch:
  %s.out = phi i64 [ %t, %inner ]
  %i2 = add i64 %i, 1
  br label %outer
exit:
  ret i64 %s
}
"""


def tri_reference(n: int) -> int:
    """What ``@tri`` computes, in Python."""
    return sum(i * j for i in range(n) for j in range(i))


# k * k is the same in every iteration: LICM hoists it out of the loop
HOIST_PHI = """\
define i64 @scaled(i64* %a, i64 %n, i64 %k) {
entry:
  br label %cond
cond:
  %i = phi i64 [ 0, %entry ], [ %i2, %body ]
  %s = phi i64 [ 0, %entry ], [ %s2, %body ]
  %c = icmp slt i64 %i, %n
  br i1 %c, label %body, label %exit
body:
  %kk = mul i64 %k, %k
  %p = getelementptr i64, i64* %a, i64 %i
  %x = load i64, i64* %p
  %y = mul i64 %x, %kk
  %s2 = add i64 %s, %y
  %i2 = add i64 %i, 1
  br label %cond
exit:
  ret i64 %s
}
"""


# a[i] = b[i] + c[i] on i32, as a bottom-tested loop (the shape loop-rotate leaves): the loop
# vectoriser's textbook case. noalias promises that a, b and c do not overlap.
VADD_PHI = """\
define void @vadd(i32* noalias %a, i32* noalias %b, i32* noalias %c, i64 %n) {
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %body, label %exit
body:
  %i = phi i64 [ 0, %entry ], [ %i2, %body ]
  %pb = getelementptr i32, i32* %b, i64 %i
  %pc = getelementptr i32, i32* %c, i64 %i
  %x = load i32, i32* %pb
  %y = load i32, i32* %pc
  %z = add i32 %x, %y
  %pa = getelementptr i32, i32* %a, i64 %i
  store i32 %z, i32* %pa
  %i2 = add i64 %i, 1
  %more = icmp slt i64 %i2, %n
  br i1 %more, label %body, label %exit
exit:
  ret void
}
"""


def _add4() -> str:
    lines = ["define void @add4(i32* noalias %a, i32* noalias %b, i32* noalias %c) {", "entry:"]
    for k in range(4):
        for p in "abc":
            lines.append(f"  %{p}{k} = getelementptr i32, i32* %{p}, i64 {k}")
        lines.append(f"  %x{k} = load i32, i32* %b{k}")
        lines.append(f"  %y{k} = load i32, i32* %c{k}")
        lines.append(f"  %z{k} = add i32 %x{k}, %y{k}")
        lines.append(f"  store i32 %z{k}, i32* %a{k}")
    return "\n".join([*lines, "  ret void", "}", ""])


# a[0..3] = b[0..3] + c[0..3], written out as four scalar adds: what the SLP vectoriser merges
ADD4 = _add4()

# The same two computations with and without the no-signed-wrap flag, for 02a's instcombine demo:
# with nsw an overflow is poison, so (x * 2) / 2 == x and x + 1 > x may be assumed.
NSW_PAIRS = """\
define i64 @halve_double_nsw(i64 %x) {
  %a = mul nsw i64 %x, 2
  %b = sdiv i64 %a, 2
  ret i64 %b
}
define i64 @halve_double_wrap(i64 %x) {
  %a = mul i64 %x, 2
  %b = sdiv i64 %a, 2
  ret i64 %b
}
define i1 @next_is_bigger_nsw(i64 %x) {
  %a = add nsw i64 %x, 1
  %c = icmp sgt i64 %a, %x
  ret i1 %c
}
define i1 @next_is_bigger_wrap(i64 %x) {
  %a = add i64 %x, 1
  %c = icmp sgt i64 %a, %x
  ret i1 %c
}
"""


def with_optnone(text: str) -> str:
    """``text`` with every function marked ``noinline optnone``, as ``clang -O0`` marks them."""
    import re

    marked = re.sub(r"^(define [^{]*)\{", r"\1#0 {", text, flags=re.M)
    return marked + "\nattributes #0 = { noinline optnone }\n"


# 02b's plugin exercise: which udivs may become lshr? Powers of two (as unsigned numbers of the
# operation's width, so i32 -2147483648 is 2**31), not 3 or 12, not sdiv, not urem, not a
# variable divisor, not a constant dividend. Each function is (i64, i64) -> i64 for the JIT.
UDIV_FUNCTIONS = """\
define i64 @by_eight(i64 %x, i64 %y) {
entry:
  %q = udiv i64 %x, 8
  ret i64 %q
}

define i64 @mixed(i64 %x, i64 %y) {
entry:
  %a = udiv i64 %x, 16
  %b = udiv i64 %y, 3
  %c = sdiv i64 %x, 4
  %d = urem i64 %y, 8
  %e = udiv exact i64 %a, 1
  %s1 = add i64 %a, %b
  %s2 = add i64 %s1, %c
  %s3 = add i64 %s2, %d
  %s4 = add i64 %s3, %e
  ret i64 %s4
}

define i64 @not_constant(i64 %x, i64 %y) {
entry:
  %m = and i64 %y, 7
  %d = add i64 %m, 1
  %q = udiv i64 %x, %d
  %r = udiv i64 64, %d
  %s = add i64 %q, %r
  ret i64 %s
}

define i64 @narrow(i64 %x, i64 %y) {
entry:
  %t = trunc i64 %x to i32
  %a = udiv i32 %t, -2147483648
  %b = udiv i32 %t, 12
  %c = udiv i32 %t, 1024
  %s = add i32 %a, %b
  %s2 = add i32 %s, %c
  %r = zext i32 %s2 to i64
  ret i64 %r
}

define i64 @in_a_loop(i64 %x, i64 %n) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %acc = phi i64 [ %x, %entry ], [ %acc.next, %loop ]
  %h = udiv i64 %acc, 2
  %acc.next = add i64 %h, %i
  %i.next = add i64 %i, 1
  %done = icmp uge i64 %i.next, 5
  br i1 %done, label %exit, label %loop
exit:
  ret i64 %acc.next
}
"""
