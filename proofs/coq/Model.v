(* OB-MODEL-1: the fine-grained model of check-then-write, over unbounded nat,
   for any number of servers N, cap M and largest weight W.
   (specs/overshoot-bound.md; the Python step functions are
   queueref.admission.protocol: accumulate, admits_check_then_write.)

   Logical path: tools/run_coq.py compiles proofs/coq with `-Q proofs/coq Queueref`;
   import with `From Queueref Require Import Model.`

   Exported definitions (stable names; other files build on them):
     upd f i v              pointwise update of a function nat -> A
     sum f k                f 0 + ... + f (k-1)
     accumulate view v      one read: view + v               (protocol.accumulate)
     admits M view n        view + n <= M                    (protocol.admits_check_then_write)
     first_slot, next_slot  where a check starts reading, and the slot after k
     finished v             a slot after one finish: v - 1
     check                  record {ck_n; ck_next; ck_view}: weight, next slot, view
     state                  record {slots : nat -> nat; checks : nat -> option check}
     init                   all slots 0, no check in progress
     total N s              sum (slots s) N, the global count
     action                 Start p n | Read p | Decide p | Finish p
     after_start, after_read, after_admit, after_reject, after_finish
                            the state after each step (shared by step and exec)
     step N M W s a s'      the step relation (inductive)
     reachable N M W s      reachable from init by steps
     exec N M W s a         the executable step function: option state
     run N M W s l          exec along a list of actions
     observe N s            (slots 0..N-1, checks 0..N-1): a computable view of a state
   Exported lemmas:
     step_exec   : step N M W s a s' <-> exec N M W s a = Some s'
     run_reachable : reachable N M W s -> run N M W s l = Some s' -> reachable N M W s'
     run_init_reachable : run N M W init l = Some s -> reachable N M W s
*)

From Coq Require Import Arith Bool List Lia.
Import ListNotations.

Definition upd {A : Type} (f : nat -> A) (i : nat) (v : A) : nat -> A :=
  fun j => if Nat.eqb j i then v else f j.

Fixpoint sum (f : nat -> nat) (k : nat) : nat :=
  match k with
  | 0 => 0
  | S k' => sum f k' + f k'
  end.

(* The protocol's step functions; each mutant of proofs/coq/theorems.json
   replaces exactly one of these lines. *)
Definition accumulate (view v : nat) : nat := view + v.
Definition admits (M view n : nat) : bool := view + n <=? M.
Definition first_slot : nat := 0.
Definition next_slot (k : nat) : nat := S k.
Definition finished (v : nat) : nat := v - 1.

Record check := mk_check { ck_n : nat; ck_next : nat; ck_view : nat }.

Record state := mk_state { slots : nat -> nat; checks : nat -> option check }.

Definition init : state := mk_state (fun _ => 0) (fun _ => None).

Definition total (N : nat) (s : state) : nat := sum (slots s) N.

Inductive action : Type :=
| Start (p n : nat)   (* p starts a check of weight n *)
| Read (p : nat)      (* p reads its next slot *)
| Decide (p : nat)    (* p, having read every slot, admits (and writes) or rejects *)
| Finish (p : nat).   (* one request of p finishes *)

Definition after_start (s : state) (p n : nat) : state :=
  mk_state (slots s) (upd (checks s) p (Some (mk_check n first_slot 0))).

Definition after_read (s : state) (p : nat) (c : check) : state :=
  mk_state (slots s)
    (upd (checks s) p
       (Some (mk_check (ck_n c) (next_slot (ck_next c))
                (accumulate (ck_view c) (slots s (ck_next c)))))).

Definition after_admit (s : state) (p : nat) (c : check) : state :=
  mk_state (upd (slots s) p (slots s p + ck_n c)) (upd (checks s) p None).

Definition after_reject (s : state) (p : nat) : state :=
  mk_state (slots s) (upd (checks s) p None).

Definition after_finish (s : state) (p : nat) : state :=
  mk_state (upd (slots s) p (finished (slots s p))) (checks s).

Section Steps.
  Variables N M W : nat.

  Inductive step : state -> action -> state -> Prop :=
  | step_start : forall s p n,
      p < N -> 1 <= n -> n <= W -> checks s p = None ->
      step s (Start p n) (after_start s p n)
  | step_read : forall s p c,
      p < N -> checks s p = Some c -> ck_next c < N ->
      step s (Read p) (after_read s p c)
  | step_admit : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      admits M (ck_view c) (ck_n c) = true ->
      step s (Decide p) (after_admit s p c)
  | step_reject : forall s p c,
      p < N -> checks s p = Some c -> N <= ck_next c ->
      admits M (ck_view c) (ck_n c) = false ->
      step s (Decide p) (after_reject s p)
  | step_finish : forall s p,
      p < N -> 0 < slots s p ->
      step s (Finish p) (after_finish s p).

  Inductive reachable : state -> Prop :=
  | reach_init : reachable init
  | reach_step : forall s a s', reachable s -> step s a s' -> reachable s'.

  Definition exec (s : state) (a : action) : option state :=
    match a with
    | Start p n =>
        if (p <? N) && (1 <=? n) && (n <=? W) then
          match checks s p with
          | None => Some (after_start s p n)
          | Some _ => None
          end
        else None
    | Read p =>
        if p <? N then
          match checks s p with
          | Some c => if ck_next c <? N then Some (after_read s p c) else None
          | None => None
          end
        else None
    | Decide p =>
        if p <? N then
          match checks s p with
          | Some c =>
              if N <=? ck_next c then
                if admits M (ck_view c) (ck_n c)
                then Some (after_admit s p c)
                else Some (after_reject s p)
              else None
          | None => None
          end
        else None
    | Finish p =>
        if (p <? N) && (0 <? slots s p) then Some (after_finish s p) else None
    end.

  Fixpoint run (s : state) (l : list action) : option state :=
    match l with
    | [] => Some s
    | a :: l' =>
        match exec s a with
        | Some s' => run s' l'
        | None => None
        end
    end.

  Lemma step_exec : forall s a s', step s a s' <-> exec s a = Some s'.
  Proof.
    intros s a s'; split.
    - intros H; destruct H; unfold exec.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H0; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H1.
        rewrite H, H0, H1; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.leb_le in H1.
        rewrite H, H0, H1, H2; reflexivity.
      + apply Nat.ltb_lt in H; apply Nat.ltb_lt in H0.
        rewrite H, H0; reflexivity.
    - destruct a as [p n | p | p | p]; unfold exec; intros H.
      + destruct (p <? N) eqn:Hp; destruct (1 <=? n) eqn:H1; destruct (n <=? W) eqn:HW;
          simpl in H; try discriminate.
        destruct (checks s p) eqn:Hc; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in H1; apply Nat.leb_le in HW.
        now constructor.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (ck_next c <? N) eqn:Hk; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in Hk.
        now apply step_read.
      + destruct (p <? N) eqn:Hp; try discriminate.
        destruct (checks s p) as [c|] eqn:Hc; try discriminate.
        destruct (N <=? ck_next c) eqn:Hk; try discriminate.
        apply Nat.ltb_lt in Hp; apply Nat.leb_le in Hk.
        destruct (admits M (ck_view c) (ck_n c)) eqn:Ha; injection H as <-.
        * now apply step_admit.
        * now apply (step_reject s p c).
      + destruct (p <? N) eqn:Hp; destruct (0 <? slots s p) eqn:H0;
          simpl in H; try discriminate.
        injection H as <-.
        apply Nat.ltb_lt in Hp; apply Nat.ltb_lt in H0.
        now constructor.
  Qed.

  Lemma run_reachable : forall l s s',
    reachable s -> run s l = Some s' -> reachable s'.
  Proof.
    induction l as [|a l IH]; simpl; intros s s' Hr H.
    - injection H as <-; exact Hr.
    - destruct (exec s a) as [t|] eqn:He; try discriminate.
      apply (IH t); [|exact H].
      apply reach_step with s a; [exact Hr|].
      now apply step_exec.
  Qed.

  Lemma run_init_reachable : forall l s, run init l = Some s -> reachable s.
  Proof. intros l s H; exact (run_reachable l init s reach_init H). Qed.
End Steps.

(* A computable picture of a state: the first N slots and checks. *)
Definition observe (N : nat) (s : state) : list nat * list (option (nat * nat * nat)) :=
  (map (slots s) (seq 0 N),
   map (fun p => option_map (fun c => (ck_n c, ck_next c, ck_view c)) (checks s p))
       (seq 0 N)).
