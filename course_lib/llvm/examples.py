"""Small LLVM IR programs the labs and tests read: the same loop at -O0 (allocas) and in SSA.

``SUM_ALLOCA`` is what ``clang -O0`` writes for ``long sum(long *a, long n)``: every variable is
a stack slot. ``SUM_PHI`` is the same function after ``mem2reg`` (typed pointers, so the
system's older ``llc`` reads it too). ``NESTED_PHI`` has a loop inside a loop, for the loop
analysis.
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
