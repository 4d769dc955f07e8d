! paramonte: ParaMonte 1.x's Fortran interface to ParaDRAM, run by herd's DRAM sampler.
!
! An existing ParaMonte Fortran model and driver compile unchanged against this module:
!
!   use paramonte, only: IK, RK, runParaDRAM        ! the procedural interface
!   call runParaDRAM(ndim, getLogFunc, "paramonte.in")
!
!   use paramonte, only: ParaDRAM                   ! the object-oriented interface
!   type(ParaDRAM) :: pd
!   call pd%runSampler(ndim = ndim, getLogFunc = getLogFunc, inputFile = "paramonte.in")
!
! getLogFunc is an ordinary Fortran function (no bind(C), ndim passed by reference) with the
! abstract interface getLogFunc_proc; a model of another signature is a compile-time error
! ("Interface mismatch in dummy procedure"), not a crash at run time. inputFile is a path to
! a ParaMonte namelist (or herd TOML) file, or the namelist text itself; absent or blank
! means the defaults. After a run, herd_last_status() is 0 (done), 1 (the run failed; what
! was sampled is flushed) or 2 (bad input; nothing written; the reason is printed to stderr).
!
! Reference: Shahmoradi & Bagheri (2020), ParaMonte; its Fortran interface (paramonte.f90).
! One run at a time per process (herd's C interface, herd/mcmc/paradram.h): a call from
! another thread waits for the run in progress; a call from inside the model of a run in
! progress is refused (herd_last_status() is 2, one line on stderr; it crashed the run).
module paramonte
  use, intrinsic :: iso_fortran_env, only: IK => int32, RK => real64
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double, c_funptr, c_funloc, c_int
  ! The C entry points' bindings live in herd_paradram (one copy); this module adapts
  ! ParaMonte's Fortran-convention models to them.
  use herd_paradram, only: run_paradram, herd_last_status
  implicit none
  private
  public :: IK, RK, getLogFunc_proc, runParaDRAM, ParaDRAM, ParaDRAM_type, herd_last_status

  !> The log density: natural log of the (unnormalised) target at Point(1:ndim).
  abstract interface
    function getLogFunc_proc(ndim, Point) result(logFunc)
      import :: IK, RK
      integer(IK), intent(in) :: ndim
      real(RK), intent(in) :: Point(ndim)
      real(RK) :: logFunc
    end function getLogFunc_proc
  end interface

  !> ParaMonte's object-oriented interface: call pd%runSampler(ndim, getLogFunc, inputFile).
  type :: ParaDRAM_type
  contains
    procedure, nopass :: runSampler => runParaDRAM
  end type ParaDRAM_type

  !> ParaMonte's name for ParaDRAM_type in its examples.
  type, extends(ParaDRAM_type) :: ParaDRAM
  end type ParaDRAM

  ! The model of the run in progress, called through log_func_c.
  procedure(getLogFunc_proc), pointer :: current_model => null()

  ! herd's guards around current_model (mcmc/c_api.cpp): begin returns 0 when this thread
  ! may set it (another thread's run is waited for), 2 when called from inside a run's model
  ! (refused: herd_last_status() is 2, one line on stderr).
  interface
    function herd_fortran_run_begin() result(status) bind(C, name="herd_fortran_run_begin")
      import :: c_int
      integer(c_int) :: status
    end function herd_fortran_run_begin
    subroutine herd_fortran_run_end() bind(C, name="herd_fortran_run_end")
    end subroutine herd_fortran_run_end
  end interface

contains

  !> Runs DRAM on getLogFunc in ndim dimensions, reading inputFile (a path, or the namelist
  !> text; absent: the defaults). Outputs as ParaMonte's, named by outputFileName. The model
  !> is called from the calling thread only. Status: herd_last_status().
  subroutine runParaDRAM(ndim, getLogFunc, inputFile)
    integer(IK), intent(in) :: ndim
    procedure(getLogFunc_proc) :: getLogFunc
    character(*), intent(in), optional :: inputFile
    integer :: status
    type(c_funptr) :: model_c
    ! One run of this module at a time: the model pointer is shared by the process. A call
    ! from inside the model is refused here, leaving the running call's model in place.
    if (herd_fortran_run_begin() /= 0) return
    current_model => getLogFunc
    ! Taken at run time into a variable: a c_funloc constant passed by reference would be
    ! placed in .rodata with a text relocation.
    model_c = c_funloc(log_func_c)
    if (present(inputFile)) then
      status = run_paradram(int(ndim, c_int32_t), model_c, inputFile)
    else
      status = run_paradram(int(ndim, c_int32_t), model_c, "")
    end if
    current_model => null()
    call herd_fortran_run_end()
  end subroutine runParaDRAM

  ! C's view of the current model: double f(int32_t ndim, double point[]).
  function log_func_c(ndim, point) result(logFunc) bind(C)
    integer(c_int32_t), value :: ndim
    real(c_double), intent(in) :: point(ndim)
    real(c_double) :: logFunc
    logFunc = current_model(int(ndim, IK), point)
  end function log_func_c

end module paramonte
