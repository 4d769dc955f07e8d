! A user environment written in Fortran 2003 (iso_c_binding) against herd/rl/c_env.h: a
! driven oscillator. State (x, v); obs (x, v); Box action a in [-1, 1] (herd clips);
! v = v + 0.1 (a - x), x = x + 0.1 v; reward -x^2; terminated when |x| > 2. Instances
! hold no global state, so the spec is declared thread-safe.
module f_oscillator_env
  use, intrinsic :: iso_c_binding
  implicit none
  type :: oscillator
    real(c_double) :: x = 0, v = 0
  end type oscillator
contains
  function f_osc_create(user, seed) result(env) bind(C, name="f_osc_create")
    type(c_ptr), value :: user            ! unused: no shared configuration
    integer(c_int64_t), value :: seed     ! unused: the dynamics are deterministic
    type(c_ptr) :: env
    type(oscillator), pointer :: p
    allocate(p)
    env = c_loc(p)
  end function f_osc_create

  function f_osc_reset(env, seed, obs) result(status) bind(C, name="f_osc_reset")
    type(c_ptr), value :: env
    integer(c_int64_t), value :: seed
    real(c_float), intent(out) :: obs(2)
    integer(c_int32_t) :: status
    type(oscillator), pointer :: p
    call c_f_pointer(env, p)
    p%x = real(modulo(seed, 1000_c_int64_t), c_double) / 1000.0_c_double - 0.5_c_double
    p%v = 0
    obs(1) = real(p%x, c_float)
    obs(2) = real(p%v, c_float)
    status = 0
  end function f_osc_reset

  function f_osc_step(env, action, obs, reward, terminated, truncated) result(status) &
      bind(C, name="f_osc_step")
    type(c_ptr), value :: env
    real(c_double), intent(in) :: action(1)
    real(c_float), intent(out) :: obs(2)
    real(c_double), intent(out) :: reward
    integer(c_int32_t), intent(out) :: terminated, truncated
    integer(c_int32_t) :: status
    type(oscillator), pointer :: p
    call c_f_pointer(env, p)
    p%v = p%v + 0.1_c_double * (action(1) - p%x)
    p%x = p%x + 0.1_c_double * p%v
    obs(1) = real(p%x, c_float)
    obs(2) = real(p%v, c_float)
    reward = -p%x * p%x
    terminated = merge(1_c_int32_t, 0_c_int32_t, abs(p%x) > 2.0_c_double)
    truncated = 0
    status = 0
  end function f_osc_step

  subroutine f_osc_destroy(env) bind(C, name="f_osc_destroy")
    type(c_ptr), value :: env
    type(oscillator), pointer :: p
    call c_f_pointer(env, p)
    deallocate(p)
  end subroutine f_osc_destroy
end module f_oscillator_env
